"""Runs beside a broker that is being SIGKILLed and restarted.
  kill_loop.py produce BOOTSTRAP TOPIC STOP_FILE ACKED_FILE [RATE]
      idempotent acks=all producer; writes "key partition offset" for every acknowledged
      message until STOP_FILE exists, at most RATE messages a second if given
  kill_loop.py consume BOOTSTRAP TOPIC STOP_FILE COMMITS_FILE SEEN_FILE
      group member; writes "key partition offset" for every message it is given to
      SEEN_FILE, and after each batch commits synchronously and appends the acknowledged
      commit ("partition offset") to COMMITS_FILE, until STOP_FILE exists
  kill_loop.py check BOOTSTRAP TOPIC ACKED_FILE COMMITS_FILE SEEN_FILE
      every acknowledged message is in the log exactly once at its acknowledged offset
      (on its partition, when librdkafka acknowledged it without one),
      offsets are dense, every message a consumer was given is still in the log at the
      offset it was given at (no crash took it back), and the group's committed offsets
      are at or after the last acknowledged commit of every partition"""
import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

# How long a group member's close may take once the faults are over.
CLOSE_MAX_S = 60

mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]

if mode == "produce":
    stop, acked_path = sys.argv[4], sys.argv[5]
    rate = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    started = time.monotonic()
    with open(acked_path, "w") as acked:
        def report(err, msg):
            if err is None:
                acked.write(f"{msg.key().decode()} {msg.partition()} {msg.offset()}\n")
            else:
                print(f"not delivered: {msg.key().decode()} to partition {msg.partition()}: {err}",
                      file=sys.stderr, flush=True)
        # librdkafka's idempotence log (epoch bumps, drains, sequence resets) goes to
        # stderr, kept beside the acks, so a record stored twice can be traced.
        # One request in flight: with more, a request that fails at a leader change
        # makes the new leader answer the ones pipelined behind it OUT_OF_ORDER_SEQUENCE
        # (as Kafka does), and librdkafka then bumps its epoch and re-sends, at the new
        # epoch, messages of other partitions that may already be stored — duplicates
        # (librdkafka issue 4953, seen here as one record at two consecutive offsets).
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 2, "message.timeout.ms": 120000, "debug": "eos",
                      "max.in.flight.requests.per.connection": 1})
        i = 0
        while not os.path.exists(stop):
            if rate and i > rate * (time.monotonic() - started):
                p.poll(0.01)
                continue
            try:
                p.produce(topic, key=f"k{i}", value=f"value-{i}", on_delivery=report)
                i += 1
            except BufferError:
                pass
            p.poll(0.001 if i % 50 == 0 else 0)
        p.flush(120)
elif mode == "consume":
    stop, commits_path, seen_path = sys.argv[4], sys.argv[5], sys.argv[6]
    # librdkafka's group log (coordinator lookups, joins, commits) goes to stderr, so a
    # member that stops making progress shows what it waits for.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "survivors", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                  "debug": "cgrp"})
    c.subscribe([topic])
    with open(commits_path, "w") as commits, open(seen_path, "w") as seen:
        while not os.path.exists(stop):
            batch = c.consume(500, 0.2)
            last = {}
            for m in batch:
                if m.error() is None:
                    seen.write(f"{m.key().decode()} {m.partition()} {m.offset()}\n")
                    last[m.partition()] = m.offset() + 1
            seen.flush()
            if not last:
                continue
            try:
                result = c.commit(offsets=[TopicPartition(topic, p, o) for p, o in last.items()], asynchronous=False)
                for tp in result:
                    if tp.error is None:
                        commits.write(f"{tp.partition} {tp.offset}\n")
                commits.flush()
            except KafkaException:
                pass  # not acknowledged: nothing to check for it
    # A close that never returns is a hung group (its coordinator never answers the
    # member's leave or last commit): fail with that, not the harness's timeout.
    closer = threading.Thread(target=c.close, daemon=True)
    closer.start()
    closer.join(CLOSE_MAX_S)
    if closer.is_alive():
        print(f"the group consumer did not close within {CLOSE_MAX_S} s: its coordinator never answered",
              file=sys.stderr, flush=True)
        os._exit(2)  # the closing thread holds the client; do not wait for it at exit
else:
    acked_path, commits_path, seen_path = sys.argv[4], sys.argv[5], sys.argv[6]
    # librdkafka acknowledges a message whose own answer was lost when a later batch of
    # its partition succeeds ("implicitly acked"), and reports no offset for it then
    # ("None"): such a message must be in the log once, on its partition.
    acked = {}
    for line in open(acked_path):
        key, partition, offset = line.split()
        assert key not in acked, f"{key} acknowledged twice"
        acked[key] = (int(partition), None if offset == "None" else int(offset))
    last_commit = {}
    for line in open(commits_path):
        partition, offset = map(int, line.split())
        last_commit[partition] = max(last_commit.get(partition, 0), offset)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False})
    partitions = list(c.list_topics(topic, timeout=10).topics[topic].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    stored, expected_next = {}, {p: 0 for p in partitions}
    remaining, idle = sum(ends.values()), 0
    while remaining > 0 and idle < 100:
        m = c.poll(0.2)
        if m is None:
            idle += 1
            continue
        assert m.error() is None, m.error()
        assert m.offset() == expected_next[m.partition()], f"offsets not dense in {m.partition()}"
        expected_next[m.partition()] = m.offset() + 1
        key = m.key().decode()
        assert key not in stored, (f"{key} stored twice: {stored[key]} and {(m.partition(), m.offset())}; "
                                   f"acknowledged at {acked.get(key)}")
        assert m.value().decode() == f"value-{key[1:]}", f"{key} altered"
        stored[key] = (m.partition(), m.offset())
        remaining -= 1
    assert remaining == 0, f"{remaining} messages below the high watermarks could not be read"
    for key, (partition, offset) in acked.items():
        found = stored.get(key)
        assert found is not None and found[0] == partition and offset in (None, found[1]), \
            f"acknowledged {key} at {(partition, offset)}, log has {found}"
    seen = 0
    for line in open(seen_path):
        key, partition, offset = line.split()
        where = (int(partition), int(offset))
        assert stored.get(key) == where, f"a consumer was given {key} at {where}, log has {stored.get(key)}"
        seen += 1
    c.close()
    g = Consumer({"bootstrap.servers": bootstrap, "group.id": "survivors", "enable.auto.commit": False})
    for attempt in range(20):
        try:
            committed = {tp.partition: tp.offset for tp in g.committed([TopicPartition(topic, p) for p in partitions], timeout=10)}
            break
        except KafkaException as e:
            # A coordinator that just moved (a cluster's leadership going back to the
            # preferred replicas) answers NOT_COORDINATOR until the client looks again.
            if attempt == 19:
                raise
            time.sleep(0.5)
    g.close()
    for p, offset in last_commit.items():
        assert committed.get(p, -1) >= offset, f"partition {p}: committed {committed.get(p)} < acknowledged {offset}"
    print(f"{len(acked)} acknowledged messages intact at their offsets among {len(stored)} stored; "
          f"{seen} consumed messages all still at the offsets they were consumed at; "
          f"{len(last_commit)} partitions' commits kept")
