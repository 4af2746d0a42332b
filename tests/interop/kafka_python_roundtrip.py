"""kafka-python 3 against weir: create a topic, produce with the default (idempotent)
producer and acks=all, read everything back with an assigned consumer.
Usage: kafka_python_roundtrip.py BOOTSTRAP TOPIC COUNT"""
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])
assert topic in admin.list_topics()
cluster = admin.describe_cluster()
assert len(cluster["brokers"]) >= 1, cluster
configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
assert "segment.bytes" in str(configs), configs
admin.close()

producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
futures = [producer.send(topic, key=str(i).encode(), value=f"value-{i}".encode()) for i in range(count)]
producer.flush(timeout=30)
offsets = [f.get(timeout=30) for f in futures]
producer.close()
assert len({(m.partition, m.offset) for m in offsets}) == count, "every record has its own offset"

consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         consumer_timeout_ms=5000)
partitions = [TopicPartition(topic, p) for p in range(4)]
consumer.assign(partitions)
consumer.seek_to_beginning(*partitions)
got = {}
for message in consumer:
    key = message.key.decode()
    assert key not in got, f"duplicate {key}"
    got[key] = message.value.decode()
    if len(got) == count:
        break
consumer.close()
missing = [i for i in range(count) if got.get(str(i)) != f"value-{i}"]
assert not missing, f"{len(missing)} records missing or altered, first {missing[:5]}"
print(f"kafka-python: {count} records produced (idempotent, acks=all) and consumed intact")
