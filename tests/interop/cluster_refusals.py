"""A cluster refuses a replication factor above its live hosts, with Kafka's error and a
message that says why. Usage: cluster_refusals.py BOOTSTRAP"""
import sys

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidReplicationFactorError

admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=20000)
try:
    admin.create_topics([NewTopic("replicated", num_partitions=3, replication_factor=9)])
    raise AssertionError("replication factor 9 was accepted")
except InvalidReplicationFactorError as e:
    assert "needs as many live hosts" in str(e), e
assert "replicated" not in admin.list_topics()
admin.close()
print("replication factor 9 refused")
