"""A transaction whose end a broker crash interrupts, with confluent-kafka (librdkafka).

  txn_crash.py write BOOTSTRAP TOPIC ID commit|abort N REPLICATION
      creates TOPIC (4 partitions, REPLICATION replicas), opens a transaction as
      transactional id ID, produces N records over every partition, then commits or aborts
      it, retrying the end through the crash the test arranges until it is answered.
  txn_crash.py check BOOTSTRAP TOPIC ID commit|abort N [reuse]
      a read_committed reader sees all N records after a commit and none after an abort,
      a read_uncommitted one all N either way, and no partition's last stable offset is
      held back; with `reuse`, a new producer of ID then commits 4 records of its own,
      which its coordinator allows only once the interrupted transaction is complete.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4
mode, bootstrap, topic, txn_id, ending, n = sys.argv[1:7]
n = int(n)
commit = ending == "commit"


def producer():
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 120000})
    p.init_transactions(90)
    return p


def end(p, deadline_s=90):
    """Commits or aborts, retrying a retriable failure (the coordinator crashed and is
    coming back, or another host is taking over) until the deadline."""
    deadline = time.time() + deadline_s
    while True:
        try:
            (p.commit_transaction if commit else p.abort_transaction)(30)
            return
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort() or err.fatal() or time.time() > deadline:
                raise
            print(f"retrying the {ending}: {err}", file=sys.stderr, flush=True)
            time.sleep(0.5)


def read(isolation, expect):
    """Keys readable from the start of every partition, until `expect` keys or nothing
    new for a while."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + isolation,
                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    keys, deadline = [], time.time() + (20 if expect else 5)
    while time.time() < deadline and (expect == 0 or len(keys) < expect):
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        keys.append(m.key().decode())
    c.close()
    return keys


def ends(isolation):
    """Every partition's end as `isolation` sees it: the last stable offset for
    read_committed, the high watermark for read_uncommitted."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation})
    found = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    c.close()
    return found


if mode == "write":
    admin = AdminClient({"bootstrap.servers": bootstrap})
    replication = int(sys.argv[7])
    for future in admin.create_topics(
            [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=replication)]).values():
        future.result(timeout=30)
    p = producer()
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=f"k-{i}", value=f"v-{i}", partition=i % PARTITIONS)
    p.flush(30)
    end(p)
    print(f"the {ending} of {n} records was answered", file=sys.stderr, flush=True)
elif mode == "check":
    expected = sorted(f"k-{i}" for i in range(n)) if commit else []
    committed = read("read_committed", len(expected))
    assert sorted(committed) == expected, \
        f"read_committed after a crash in the {ending}: {len(committed)} records, expected {len(expected)}"
    everything = read("read_uncommitted", n)
    assert sorted(everything) == sorted(f"k-{i}" for i in range(n)), \
        f"read_uncommitted: {len(everything)} records, expected {n}"
    stable, high = ends("read_committed"), ends("read_uncommitted")
    assert stable == high, f"a transaction still holds a partition: last stable offsets {stable}, high watermarks {high}"
    print(f"after the {ending}: read_committed saw {len(committed)} records, read_uncommitted {len(everything)}, "
          f"every last stable offset at its high watermark {high}")
    if len(sys.argv) > 7 and sys.argv[7] == "reuse":
        p = producer()
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, key=f"again-{i}", value="again", partition=i)
        p.flush(30)
        p.commit_transaction(30)
        again = read("read_committed", len(expected) + 4)
        assert sorted(again) == sorted(expected + [f"again-{i}" for i in range(4)]), again
        print("a new producer of the same transactional id committed after it")
else:
    sys.exit(f"unknown mode {mode}")
