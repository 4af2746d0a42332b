"""confluent-kafka and kafka-python logging in with SASL (SCRAM-SHA-512, SCRAM-SHA-256 or
PLAIN) over TLS (security.protocol SASL_SSL) or plaintext (SASL_PLAINTEXT): create a
topic, produce, consume through a group and commit, resume from the commit; then a
wrong password is refused by both clients.
Usage: sasl_roundtrip.py BOOTSTRAP CA_PEM|- TOPIC MECHANISM USER PASSWORD"""
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

bootstrap, ca, topic, mechanism, user, password = sys.argv[1:7]
tls = ca != "-"
protocol = "SASL_SSL" if tls else "SASL_PLAINTEXT"
conf = {
    "bootstrap.servers": bootstrap,
    "security.protocol": protocol,
    "sasl.mechanisms": mechanism,
    "sasl.username": user,
    "sasl.password": password,
}
if tls:
    conf["ssl.ca.location"] = ca

admin = AdminClient(conf)
for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    f.result(timeout=20)

p = Producer({**conf, "acks": "all"})
for i in range(200):
    p.produce(topic, key=f"k{i}", value=f"v{i}")
assert p.flush(30) == 0

group = f"{topic}-group"
c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([topic])
seen = set()
deadline = time.time() + 60
while len(seen) < 200 and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and m.error() is None:
        seen.add(m.key().decode())
c.commit(asynchronous=False)
c.close()
assert len(seen) == 200, f"confluent-kafka consumed {len(seen)} of 200"

kafka_python = {
    "security_protocol": protocol,
    "sasl_mechanism": mechanism,
    "sasl_plain_username": user,
    "sasl_plain_password": password,
}
if tls:
    kafka_python.update({"ssl_cafile": ca, "ssl_check_hostname": True})
kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **kafka_python)
for i in range(200, 300):
    kp.send(topic, key=f"k{i}".encode(), value=b"v")
kp.flush(30)
kp.close()
kc = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                   enable_auto_commit=False, consumer_timeout_ms=8000, **kafka_python)
later = {m.key.decode() for m in kc}
kc.close()
assert later == {f"k{i}" for i in range(200, 300)}, f"kafka-python resumed from the group's commit: {len(later)}"

# A wrong password: both clients are refused.
errors = []
bad = AdminClient({**conf, "sasl.password": password + "x", "error_cb": lambda e: errors.append(str(e))})
try:
    bad.list_topics(timeout=5)
    raise AssertionError("confluent-kafka listed topics with a wrong password")
except KafkaException:
    pass
bad.poll(1)  # serves error_cb
assert any("Authentication failed: invalid user name or password" in e for e in errors), errors
try:
    KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=3000,
                  **{**kafka_python, "sasl_plain_password": password + "x"})
    raise AssertionError("kafka-python connected with a wrong password")
except KafkaError as e:
    print(f"kafka-python with a wrong password: {e!r}")
print(f"{protocol} {mechanism}: confluent-kafka and kafka-python produced, consumed, committed; wrong passwords refused")
