"""confluent-kafka and kafka-python as a principal with ACLs (SASL_PLAINTEXT, PLAIN):
it may create alices-* topics, produce to and consume them in alices-* groups and
commit; writing to a topic it has no WRITE on and joining a group it has no READ on are
refused with Kafka's authorization errors.
Usage: acl_clients.py BOOTSTRAP USER PASSWORD"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

bootstrap, user, password = sys.argv[1:4]
conf = {
    "bootstrap.servers": bootstrap,
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanisms": "PLAIN",
    "sasl.username": user,
    "sasl.password": password,
}
topic = "alices-topic"
admin = AdminClient(conf)
for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    f.result(timeout=20)

p = Producer({**conf, "acks": "all"})
for i in range(100):
    p.produce(topic, key=f"k{i}", value=f"v{i}")
assert p.flush(30) == 0

c = Consumer({**conf, "group.id": "alices-g", "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([topic])
seen = set()
deadline = time.time() + 60
while len(seen) < 100 and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and m.error() is None:
        seen.add(m.key().decode())
c.commit(asynchronous=False)
c.close()
assert len(seen) == 100, f"consumed {len(seen)} of 100"

# Refused: producing to a topic without WRITE.
failures = []
refused = Producer({**conf, "acks": "all", "message.timeout.ms": 5000})
refused.produce("audit", value=b"x", on_delivery=lambda err, msg: failures.append(err))
refused.flush(10)
assert failures and failures[0] is not None and failures[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, failures

# Refused: a group without READ.
outsider = Consumer({**conf, "group.id": "not-alices", "auto.offset.reset": "earliest"})
outsider.subscribe([topic])
group_error = None
deadline = time.time() + 20
while group_error is None and time.time() < deadline:
    m = outsider.poll(0.5)
    if m is not None and m.error() is not None:
        group_error = m.error()
outsider.close()
assert group_error is not None and group_error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, group_error

sasl = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": user,
    "sasl_plain_password": password,
}
kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **sasl)
for i in range(100, 150):
    kp.send(topic, key=f"k{i}".encode(), value=b"v")
kp.flush(30)
try:
    kp.send("audit", value=b"x").get(timeout=10)
    raise AssertionError("kafka-python wrote to a topic without WRITE")
except TopicAuthorizationFailedError:
    pass
kp.close()
kc = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="alices-g", auto_offset_reset="earliest",
                   enable_auto_commit=False, consumer_timeout_ms=8000, **sasl)
later = {m.key.decode() for m in kc}
kc.close()
assert later == {f"k{i}" for i in range(100, 150)}, f"kafka-python resumed from the commit: {len(later)}"
print("ACLs: allowed work done by confluent-kafka and kafka-python; unauthorised topic and group refused")
