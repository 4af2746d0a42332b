"""Deletes a consumer group with confluent-kafka's admin client, retrying while its
coordinator is moving. Usage: group_delete.py BOOTSTRAP GROUP"""
import sys
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

bootstrap, group = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
for attempt in range(20):
    try:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result()
        break
    except KafkaException as e:
        if attempt == 19:
            raise AssertionError(f"deleting {group}: {e}")
        time.sleep(0.5)
print(f"deleted group {group}")
