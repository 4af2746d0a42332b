"""confluent-kafka (librdkafka) against weir: idempotent producer with acks=all, then an
assigned consumer reads everything back. Usage: confluent_kafka_roundtrip.py BOOTSTRAP TOPIC COUNT"""
import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
for future in admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)]).values():
    future.result(timeout=10)

errors = []
producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
for i in range(count):
    producer.produce(topic, key=str(i), value=f"value-{i}",
                     on_delivery=lambda err, msg: errors.append(err) if err else None)
    producer.poll(0)
assert producer.flush(30) == 0, "all delivered"
assert not errors, errors[:3]

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
got = {}
idle = 0
while len(got) < count and idle < 50:
    message = consumer.poll(0.2)
    if message is None:
        idle += 1
        continue
    assert message.error() is None, message.error()
    key = message.key().decode()
    assert key not in got, f"duplicate {key}"
    got[key] = message.value().decode()
consumer.close()
missing = [i for i in range(count) if got.get(str(i)) != f"value-{i}"]
assert not missing, f"{len(missing)} records missing or altered, first {missing[:5]}"
print(f"confluent-kafka: {count} records produced (idempotent, acks=all) and consumed intact")
