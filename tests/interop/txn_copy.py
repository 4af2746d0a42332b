"""Exactly-once copying under faults, as Kafka's transactions system test does it, with
confluent-kafka: a consume-transform-produce loop that reads INPUT read_committed in a
group, writes each record to OUTPUT and commits its input offsets in the same
transaction, while the harness kills hosts.
  txn_copy.py seed BOOTSTRAP INPUT COUNT
      writes COUNT records "k{i}" (idempotent, acks=all)
  txn_copy.py copy BOOTSTRAP INPUT OUTPUT COUNT
      copies until the group's committed input offsets cover COUNT records; on an
      abortable error aborts and rewinds to the committed offsets, on a fatal one
      (fenced, or a producer that cannot go on) starts a new instance with the same
      transactional id, which fences the old one
  txn_copy.py check BOOTSTRAP OUTPUT COUNT
      OUTPUT, read read_committed, holds every input key exactly once"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

mode, bootstrap = sys.argv[1], sys.argv[2]
PARTITIONS = 3
# Per transaction; small, so the copy spans the faults.
BATCH = 40


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


if mode == "seed":
    topic, count = sys.argv[3], int(sys.argv[4])
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(count):
        p.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(60) == 0, "seeded"
    print(f"seeded {count} records")

elif mode == "copy":
    source, sink, count = sys.argv[3], sys.argv[4], int(sys.argv[5])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copier",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    tps = [TopicPartition(source, q) for q in range(PARTITIONS)]
    consumer.assign(tps)

    def new_producer():
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "copier-1",
                      "transaction.timeout.ms": 20000, "message.timeout.ms": 20000})
        while True:
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                log("init_transactions:", e)
                time.sleep(1)

    def rewind():
        """Back to the group's committed offsets (what the last committed transaction
        consumed), by assigning the partitions at them: librdkafka refuses a seek on a
        partition whose fetcher has not started yet (_STATE), an assignment never."""
        while True:
            try:
                committed = consumer.committed(tps, timeout=10)
                consumer.assign([TopicPartition(source, tp.partition, max(tp.offset, 0))
                                 for tp in committed])
                return sum(max(tp.offset, 0) for tp in committed)
            except KafkaException as e:
                log("rewind:", e)
                time.sleep(1)

    producer = new_producer()
    done = rewind()
    aborts = restarts = commits = 0
    deadline = time.time() + 400
    while done < count:
        assert time.time() < deadline, f"copied {done} of {count} in 400 s"
        batch = consumer.consume(BATCH, 1.0)
        batch = [m for m in batch if m.error() is None]
        if not batch:
            continue
        try:
            producer.begin_transaction()
            for m in batch:
                producer.produce(sink, key=m.key(), value=m.value(), partition=m.partition())
            ends = {}
            for m in batch:
                ends[m.partition()] = m.offset() + 1
            positions = [TopicPartition(source, q, o) for q, o in ends.items()]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            while True:
                try:
                    producer.commit_transaction(30)
                    break
                except KafkaException as e:
                    if not e.args[0].retriable():
                        raise
                    log("commit retried:", e)
            commits += 1
            done = rewind()
        except KafkaException as e:
            err = e.args[0]
            log("transaction failed:", err, "fatal" if err.fatal() else "abortable" if err.txn_requires_abort() else "")
            if err.txn_requires_abort():
                try:
                    producer.abort_transaction(30)
                    aborts += 1
                except KafkaException as again:
                    log("abort failed:", again)
                    producer = new_producer()
                    restarts += 1
            else:
                producer = new_producer()
                restarts += 1
            done = rewind()
        time.sleep(0.1)
    consumer.close()
    print(f"copied {count} records in {commits} transactions ({aborts} aborted, {restarts} new instances)")

elif mode == "check":
    sink, count = sys.argv[3], int(sys.argv[4])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(sink, q, 0) for q in range(PARTITIONS)])
    seen = {}
    idle = 0
    while idle < 40:
        m = c.poll(0.25)
        if m is None or m.error():
            idle += 1
            continue
        idle = 0
        key = m.key().decode()
        seen.setdefault(key, []).append((m.partition(), m.offset()))
    c.close()
    duplicates = {k: v for k, v in seen.items() if len(v) > 1}
    missing = [i for i in range(count) if f"k{i}" not in seen]
    extra = [k for k in seen if not (k.startswith("k") and k[1:].isdigit() and int(k[1:]) < count)]
    assert not duplicates, f"{len(duplicates)} keys copied twice, e.g. {list(duplicates.items())[:3]}"
    assert not missing, f"{len(missing)} keys never copied, first {missing[:5]}"
    assert not extra, f"unexpected keys {extra[:5]}"
    print(f"output holds each of the {count} input records exactly once")
