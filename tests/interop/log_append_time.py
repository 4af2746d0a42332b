"""A topic with message.timestamp.type=LogAppendTime, through confluent-kafka: records sent
with old timestamps come back stamped with the broker's time (timestamp type
LOG_APPEND_TIME), and offsets_for_times finds them by that time.
Usage: log_append_time.py BOOTSTRAP TOPIC"""
import sys
import time

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                              config={"message.timestamp.type": "LogAppendTime"})])[topic].result(10)
before = int(time.time() * 1000)
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
for i in range(5):
    producer.produce(topic, value=f"old {i}", partition=0, timestamp=1_500_000_000_000 + i)
assert producer.flush(30) == 0
after = int(time.time() * 1000)

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stamps", "enable.auto.commit": False})
consumer.assign([TopicPartition(topic, 0, 0)])
stamps = []
deadline = time.time() + 30
while len(stamps) < 5 and time.time() < deadline:
    m = consumer.poll(0.2)
    if m is not None and m.error() is None:
        stamps.append(m.timestamp())
assert len(stamps) == 5, stamps
for kind, ts in stamps:
    assert kind == TIMESTAMP_LOG_APPEND_TIME, stamps
    assert before - 1000 <= ts <= after + 1000, (before, ts, after)
[found] = consumer.offsets_for_times([TopicPartition(topic, 0, before - 1000)], timeout=10)
assert found.offset == 0, found
[past] = consumer.offsets_for_times([TopicPartition(topic, 0, after + 60_000)], timeout=10)
assert past.offset == -1, past
consumer.close()
print(f"log_append_time: 5 records stamped {stamps[0][1]}..{stamps[-1][1]}")
