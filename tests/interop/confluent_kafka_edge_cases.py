"""confluent-kafka against weir: acks=all with linger.ms=5 where every delivery report
must succeed; headers, null keys, empty values and a 900 KiB message round-trip; the
watermarks ListOffsets reports equal what was produced.
Usage: confluent_kafka_edge_cases.py BOOTSTRAP TOPIC"""
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic = sys.argv[1], sys.argv[2]
big = b"x" * (900 * 1024)
cases = [
    (b"k1", b"plain", [("h1", b"v1"), ("h2", b"")]),
    (None, b"null key", None),
    (b"k3", b"", None),
    (b"k4", None, [("only", b"header")]),
    (b"big", big, None),
]
reports = []
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                     "message.max.bytes": 2 * 1024 * 1024})
for key, value, headers in cases:
    producer.produce(topic, key=key, value=value, headers=headers, partition=0,
                     on_delivery=lambda err, msg: reports.append(err))
for i in range(1000):
    producer.produce(topic, key=str(i), value=f"v{i}", partition=0,
                     on_delivery=lambda err, msg: reports.append(err))
assert producer.flush(30) == 0
assert len(reports) == 1005 and all(r is None for r in reports), [r for r in reports if r][:3]

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                     "fetch.max.bytes": 4 * 1024 * 1024, "max.partition.fetch.bytes": 4 * 1024 * 1024})
low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
assert (low, high) == (0, 1005), (low, high)
consumer.assign([TopicPartition(topic, 0, 0)])
got = []
idle = 0
while len(got) < 1005 and idle < 50:
    m = consumer.poll(0.2)
    if m is None:
        idle += 1
        continue
    assert m.error() is None, m.error()
    got.append(m)
consumer.close()
assert len(got) == 1005, len(got)
for (key, value, headers), m in zip(cases, got):
    assert m.key() == key, (m.key(), key)
    assert (m.value() or b"") == (value or b""), (len(m.value() or b""), len(value or b""))
    assert (m.headers() or []) == (headers or []), (m.headers(), headers)
assert [m.offset() for m in got] == list(range(1005)), "dense offsets in order"
print("confluent-kafka: headers, null keys, empty values, 900 KiB message and watermarks ok")
