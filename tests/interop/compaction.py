"""A compacted topic through confluent-kafka: 1,000 keys written in five versions (lz4
batches, one round every 150 ms so segment.ms rolls a segment per round), tombstones
for keys 0-99, a keyless record refused with INVALID_RECORD. Reading from the beginning
while compaction runs, every record is the one produced at its offset; once it has
run, each live key reads exactly once, its newest value at its original offset, and the
tombstones are gone after delete.retention.ms. Run again after a crash (second
argument 'check'), the compacted log reads the same.
Usage: compaction.py BOOTSTRAP TOPIC [produce|check]"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, phase, state = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
policy = sys.argv[5] if len(sys.argv) > 5 else "compact"
KEYS, VERSIONS, DEAD = 1000, 5, 100


def read_all():
    """Every record from offset 0 to the high watermark: {offset: (key, value)}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = {}
    deadline = time.time() + 30
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                break
            raise SystemExit(f"consume: {m.error()}")
        out[m.offset()] = (m.key().decode(), None if m.value() is None else m.value().decode())
    c.close()
    return out


def consistent(seen, produced, live):
    for offset, record in seen.items():
        assert tuple(produced[offset]) == record, (offset, record, produced[offset])
    missing = [o for o in live if o not in seen]
    assert not missing, f"{len(missing)} live records missing, first {missing[:5]}"


if phase == "fill":
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": policy, "segment.ms": "100", "delete.retention.ms": "3000"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "compression.type": "lz4", "enable.idempotence": True})
    produced, refused = {}, []

    def delivered(err, msg):
        if err is not None:
            refused.append(err)
        else:
            key = msg.key().decode() if msg.key() is not None else None
            value = None if msg.value() is None else msg.value().decode()
            produced[msg.offset()] = (key, value)

    for version in range(VERSIONS):
        for k in range(KEYS):
            producer.produce(topic, key=f"key-{k}", value=f"key-{k} version {version} " + os.urandom(300).hex(),
                             partition=0, on_delivery=delivered)
            producer.poll(0)
        assert producer.flush(30) == 0
        time.sleep(0.15)
    for k in range(DEAD):
        producer.produce(topic, key=f"key-{k}", value=None, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert not refused, refused
    time.sleep(0.15)
    producer.produce(topic, key="roll", value="seals the segments before it", partition=0,
                     on_delivery=delivered)
    assert producer.flush(30) == 0

    if policy == "compact":
        plain = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        plain.produce(topic, value="no key", partition=0, on_delivery=delivered)
        plain.flush(30)
        assert len(refused) == 1 and refused[0].code() == KafkaError.INVALID_RECORD, refused

    newest = {}
    for offset, (key, value) in sorted(produced.items()):
        newest[key] = offset
    live = {o: produced[o] for o in newest.values() if produced[o][1] is not None}
    with open(state, "w") as f:
        json.dump({"produced": produced, "live": live}, f)
    print(f"compaction: {len(produced)} records written ({policy}), {len(live)} to keep")
    sys.exit(0)

with open(state) as f:
    saved = json.load(f)
produced = {int(o): tuple(r) for o, r in saved["produced"].items()}
live = {int(o): tuple(r) for o, r in saved["live"].items()}
if phase == "consistent":
    seen = read_all()
    consistent(seen, produced, live)
    print(f"compaction (consistent): {len(seen)} records, each as produced")
elif phase == "wait":
    # Read while compaction runs: every read is consistent, until it is the compacted log.
    deadline, views = time.time() + 90, 0
    while time.time() < deadline:
        seen = read_all()
        views += 1
        consistent(seen, produced, live)
        if seen == live:
            break
        time.sleep(0.3)
    assert seen == live, f"{len(seen)} records read, {len(live)} expected after {views} reads"
    print(f"compaction: {len(produced)} records -> {len(live)} (newest per key, tombstones "
          f"gone) after {views} consistent reads")
else:
    seen = read_all()
    assert seen == live, f"after the crash: {len(seen)} records read, {len(live)} expected"
    print(f"compaction (check): {len(live)} records as compacted")
