"""Static membership with confluent-kafka: two members with group.instance.id share a
topic; one restarts (closes without leaving, as static members do, and comes back with
the same instance id within its session timeout). The other member sees no rebalance,
and the restarted one gets its old partitions back.
Usage: groups_static.py BOOTSTRAP TOPIC"""
import sys
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(timeout=10)
revocations = {"a": 0, "b": 0}


def member(instance):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "static", "group.instance.id": instance,
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    c.subscribe([topic], on_revoke=lambda consumer, parts: revocations.__setitem__(instance, revocations[instance] + 1))
    return c


def settle(consumers, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0.05)
        owned = sorted(tp.partition for c in consumers for tp in c.assignment())
        # Every member holds partitions: not a moment before the second one joined.
        if owned == [0, 1, 2, 3] and all(c.assignment() for c in consumers):
            return
    raise AssertionError("group did not settle")


a, b = member("a"), member("b")
settle([a, b])
before_a = sorted(tp.partition for tp in a.assignment())
revocations["b"] = 0
a.close()  # a static member leaves no LeaveGroup behind
a = member("a")
settle([a, b])
time.sleep(1.5)
for _ in range(20):
    a.poll(0.05)
    b.poll(0.05)
after_a = sorted(tp.partition for tp in a.assignment())
assert after_a == before_a, (before_a, after_a)
assert revocations["b"] == 0, "b saw a rebalance"
a.close()
b.close()
print(f"static member a came back with {after_a} and b was never revoked")
