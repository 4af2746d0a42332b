"""Consumer groups with confluent-kafka against weir. Produces COUNT messages to a
4-partition topic; two consumers in one group split the partitions and together see
every message exactly once while committing; one closes, the other takes over its
partitions from the committed offsets; a new consumer after both closed gets nothing
old, then exactly the newly produced messages.
Usage: groups_confluent.py BOOTSTRAP TOPIC COUNT"""
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
for f in admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)]).values():
    f.result(timeout=10)


def produce(start, n):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
    assert p.flush(30) == 0


def consumer():
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "workers", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    return c


seen = {}
a, b = consumer(), consumer()
# Let the group settle (both members assigned) before there is anything to consume, so
# no commit meets a rebalance.
deadline = time.time() + 30
while not (a.assignment() and b.assignment()) and time.time() < deadline:
    for c in (a, b):
        assert c.poll(0.1) is None, "nothing produced yet"
assert a.assignment() and b.assignment(), "both members got partitions"
produce(0, count)
deadline = time.time() + 60
while len(seen) < count and time.time() < deadline:
    for name, c in (("a", a), ("b", b)):
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        key = m.key().decode()
        assert key not in seen, f"{key} delivered twice ({seen.get(key)} and {name})"
        seen[key] = name
        c.commit(message=m, asynchronous=False)
assert len(seen) == count, f"only {len(seen)} of {count} delivered"
assert set(seen.values()) == {"a", "b"}, "both consumers got partitions"
a_parts = {tp.partition for tp in a.assignment()}
b_parts = {tp.partition for tp in b.assignment()}
assert a_parts and b_parts and not (a_parts & b_parts) and a_parts | b_parts == {0, 1, 2, 3}, (a_parts, b_parts)

# a leaves; b takes over a's partitions from the committed offsets: new messages only.
a.close()
deadline = time.time() + 30
while len(b.assignment()) < 4 and time.time() < deadline:
    assert b.poll(0.1) is None, "nothing new produced yet"
produce(count, 100)
more = {}
deadline = time.time() + 60
while len(more) < 100 and time.time() < deadline:
    m = b.poll(0.1)
    if m is None or m.error():
        continue
    key = m.key().decode()
    assert key not in seen and key not in more, f"{key} re-delivered after the rebalance"
    more[key] = True
    b.commit(message=m, asynchronous=False)
assert len(more) == 100, f"b got {len(more)} of the 100 new messages"
assert {tp.partition for tp in b.assignment()} == {0, 1, 2, 3}, "b owns every partition"
b.close()

# Everything is committed: a fresh member of the group gets nothing old.
c = consumer()
stray = []
deadline = time.time() + 8
while time.time() < deadline:
    m = c.poll(0.2)
    if m is not None and not m.error():
        stray.append(m.key().decode())
c.close()
assert not stray, f"{len(stray)} committed messages re-delivered, e.g. {stray[:3]}"
print(f"confluent-kafka groups: {count} split over two members exactly once, takeover and resume ok")
