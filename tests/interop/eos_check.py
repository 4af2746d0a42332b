"""Reads TOPIC at READ_COMMITTED from the start and checks that its values are the
integers 0..COUNT-1, each exactly once (what Kafka's VerifiableProducer wrote to the
input of a transactional copy). Usage: eos_check.py BOOTSTRAP TOPIC PARTITIONS COUNT"""
import sys
from collections import Counter

from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, partitions, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-checker", "enable.auto.commit": False,
              "isolation.level": "read_committed"})
c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
seen = Counter()
idle = 0
while idle < 40:
    m = c.poll(0.25)
    if m is None or m.error():
        idle += 1
        continue
    idle = 0
    seen[m.value().decode()] += 1
c.close()
duplicated = {v: n for v, n in seen.items() if n > 1}
missing = [i for i in range(count) if str(i) not in seen]
unexpected = [v for v in seen if not (v.isdigit() and int(v) < count)]
assert not duplicated, f"{len(duplicated)} values copied more than once, e.g. {list(duplicated.items())[:5]}"
assert not missing, f"{len(missing)} values never copied, first {missing[:5]}"
assert not unexpected, f"unexpected values {unexpected[:5]}"
print(f"{topic} holds each of the {count} input values exactly once")
