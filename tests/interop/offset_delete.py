"""OffsetDelete through kafka-python's admin client (confluent-kafka has no call for it),
around a confluent-kafka group member: while the member consumes the topic its offsets
cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC); once the member has left, deleting
partition 0's offset removes it and keeps partition 1's.
Usage: offset_delete.py BOOTSTRAP TOPIC"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import GroupSubscribedToTopicError, NoError

bootstrap, topic = sys.argv[1], sys.argv[2]
group = "deleting"
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
for p in range(2):
    for i in range(5):
        producer.produce(topic, value=f"{p}-{i}", partition=p)
assert producer.flush(30) == 0

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
consumer.subscribe([topic])
got = 0
deadline = time.time() + 30
while got < 10 and time.time() < deadline:
    m = consumer.poll(0.2)
    if m is not None and m.error() is None:
        got += 1
assert got == 10, got
consumer.commit(asynchronous=False)


deleter = KafkaAdminClient(bootstrap_servers=bootstrap)


def delete(partitions):
    return deleter.delete_group_offsets(group, [KTopicPartition(topic, p) for p in partitions])


result = delete([0])
assert list(result.values()) == [GroupSubscribedToTopicError], result

consumer.close()  # leaves the group
result = delete([0])
assert list(result.values()) == [NoError], result
deleter.close()

left = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
committed = left.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
left.close()
offsets = {tp.partition: tp.offset for tp in committed}
assert offsets[0] < 0 and offsets[1] == 5, offsets
print(f"offset_delete: refused while consumed, then partition 0 deleted, partition 1 kept: {offsets}")
