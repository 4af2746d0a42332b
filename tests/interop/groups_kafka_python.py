"""kafka-python group consumer against weir: consume half, commit, close; reopen and
resume with nothing missing and nothing re-delivered.
Usage: groups_kafka_python.py BOOTSTRAP TOPIC COUNT"""
import sys

from kafka import KafkaConsumer, KafkaProducer

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
for i in range(count):
    producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
producer.flush()
producer.close()


def consume(limit):
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="py-group", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=6000, session_timeout_ms=6000,
                      heartbeat_interval_ms=500)
    got = []
    for m in c:
        got.append(m.key.decode())
        if len(got) == limit:
            break
    c.commit()
    c.close()
    return got


first = consume(count // 2)
second = consume(count)
assert len(first) == count // 2, len(first)
assert not set(first) & set(second), "nothing re-delivered"
assert set(first) | set(second) == {f"k{i}" for i in range(count)}, "nothing missing"
print(f"kafka-python group: {len(first)} then {len(second)} after reopening, none missing or repeated")
