"""confluent-kafka's offsets_for_times against weir, on records batched together: ten
records sent in one batch with timestamps a second apart, once per compression codec
(none, gzip, snappy, lz4, zstd), each codec to its own partition. Kafka answers the first
record whose timestamp reaches the target: the first record, one between two records
(the later one), the last, and nothing (-1) past the end.
Usage: offsets_for_times.py BOOTSTRAP TOPIC"""
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic = sys.argv[1], sys.argv[2]
base = 1_700_000_000_000
codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
for partition, codec in enumerate(codecs):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1000,
                         "batch.num.messages": 10, "compression.type": codec})
    reports = []
    for i in range(10):
        producer.produce(topic, key=f"k{i}", value=f"record {i} " * 20, partition=partition,
                         timestamp=base + 1000 * i, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert all(err is None for err, _ in reports), reports
    assert sorted(o for _, o in reports) == list(range(10)), reports

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
cases = [
    (base - 5000, 0),          # before the first record
    (base, 0),                 # the first record
    (base + 4500, 5),          # between the 5th and 6th record
    (base + 5000, 5),          # exactly the 6th
    (base + 9000, 9),          # the last record
    (base + 9001, -1),         # past the end
]
for partition, codec in enumerate(codecs):
    for target, expected in cases:
        [answer] = consumer.offsets_for_times([TopicPartition(topic, partition, target)], timeout=10)
        assert answer.error is None, (codec, answer.error)
        assert answer.offset == expected, (codec, target - base, answer.offset, expected)
consumer.close()
print(f"offsets_for_times exact on {len(codecs)} codecs x {len(cases)} targets")
