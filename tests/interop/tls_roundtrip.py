"""confluent-kafka and kafka-python over TLS (security.protocol SSL), with a client
certificate when given: create a topic, produce, consume through a group (so
FindCoordinator answers with the TLS port), read everything back.
Usage: tls_roundtrip.py BOOTSTRAP CA_PEM TOPIC [CLIENT_CERT CLIENT_KEY]"""
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

bootstrap, ca, topic = sys.argv[1:4]
cert, key = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None, None)
conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}
if cert:
    conf.update({"ssl.certificate.location": cert, "ssl.key.location": key})

admin = AdminClient(conf)
for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    f.result(timeout=20)
md = admin.list_topics(timeout=10)
tls_port = int(bootstrap.rsplit(":", 1)[1])
assert all(b.port >= tls_port for b in md.brokers.values()), f"Metadata lists TLS ports: {md.brokers}"

p = Producer({**conf, "acks": "all"})
for i in range(200):
    p.produce(topic, key=f"k{i}", value=f"v{i}")
assert p.flush(30) == 0

c = Consumer({**conf, "group.id": "tls-group", "auto.offset.reset": "earliest", "enable.auto.commit": False})
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

ssl = {"security_protocol": "SSL", "ssl_cafile": ca, "ssl_check_hostname": True}
if cert:
    ssl.update({"ssl_certfile": cert, "ssl_keyfile": key})
kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **ssl)
for i in range(200, 300):
    kp.send(topic, key=f"k{i}".encode(), value=b"v")
kp.flush(30)
kp.close()
kc = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="tls-group", auto_offset_reset="earliest",
                   enable_auto_commit=False, consumer_timeout_ms=8000, **ssl)
later = {m.key.decode() for m in kc}
kc.close()
assert later == {f"k{i}" for i in range(200, 300)}, f"kafka-python resumed from the group's commit: {len(later)}"
print(f"TLS{' with a client certificate' if cert else ''}: confluent-kafka and kafka-python produced, consumed and committed")
