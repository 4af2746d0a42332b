"""CreatePartitions through confluent-kafka's AdminClient, picked up by a running
producer and a running consumer group: the topic grows from 2 to 4 partitions, the
producer writes to the new ones once its metadata shows them, the group rebalances and
consumes from all four; shrinking is refused with INVALID_PARTITIONS.
Usage: create_partitions.py BOOTSTRAP TOPIC"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)

producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                     "topic.metadata.refresh.interval.ms": 500})
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "growing",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 500})
consumer.subscribe([topic])
seen = set()


def consume_until(partitions, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline and not partitions <= seen:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            seen.add(m.partition())
    return partitions <= seen


for p in range(2):
    producer.produce(topic, value=f"before {p}", partition=p)
assert producer.flush(30) == 0
assert consume_until({0, 1}, 30), f"saw partitions {seen} before growing"

admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
try:
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    raise AssertionError("shrinking to 3 partitions was accepted")
except KafkaException as e:
    assert e.args[0].code() == KafkaError.INVALID_PARTITIONS, e

deadline = time.time() + 30
while len(producer.list_topics(topic, timeout=5).topics[topic].partitions) < 4:
    assert time.time() < deadline, "the producer never saw 4 partitions"
    time.sleep(0.2)
for p in range(4):
    producer.produce(topic, value=f"after {p}", partition=p)
assert producer.flush(30) == 0
assert consume_until({0, 1, 2, 3}, 60), f"the group consumed only partitions {seen}"
consumer.close()
print("create_partitions: 2 -> 4 partitions, producer and group followed")
