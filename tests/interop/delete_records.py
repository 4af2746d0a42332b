"""DeleteRecords through confluent-kafka's AdminClient: records before offset 40 are
deleted; the low watermark moves, a consumer asking for offset 10 is reset (it is out of
range) and reads from 40; run again after the broker restarted (second argument
'check'), the deletion held.
Usage: delete_records.py BOOTSTRAP TOPIC [produce|check]"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

bootstrap, topic, phase = sys.argv[1], sys.argv[2], sys.argv[3]

if phase == "produce":
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(100):
        producer.produce(topic, value=f"record {i}", partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [result] = admin.delete_records([TopicPartition(topic, 0, 40)]).values()
    deleted = result.result(10)
    assert deleted.low_watermark == 40, deleted

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-delete",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
assert (low, high) == (40, 100), (low, high)
consumer.assign([TopicPartition(topic, 0, 10)])
first = None
deadline = time.time() + 30
while first is None and time.time() < deadline:
    m = consumer.poll(0.2)
    if m is not None and m.error() is None:
        first = m.offset()
consumer.close()
assert first == 40, first
print(f"delete_records ({phase}): low watermark 40, a fetch at 10 reset to {first}")
