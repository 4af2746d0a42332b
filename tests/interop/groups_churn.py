"""Group churn against weir with confluent-kafka: MEMBERS consumers join one group on a
PARTITIONS-partition topic, then rounds of half of them leaving and new ones joining;
after each round the group settles with every partition assigned to exactly one member.
Then one member is killed (its process, without leaving) and the survivor takes over
its partitions once the session timeout passes.
Usage: groups_churn.py BOOTSTRAP TOPIC MEMBERS PARTITIONS ROUNDS"""
import os
import signal
import subprocess
import sys
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, members, partitions, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(timeout=10)


def member(group):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "enable.auto.commit": False})
    c.subscribe([topic])
    return c


def settle(consumers, timeout=90):
    """Polls everyone until the assignments cover every partition exactly once."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0)
        owned = [tp.partition for c in consumers for tp in c.assignment()]
        # With no more members than partitions, everyone must hold some: otherwise the
        # check could pass on the old members before the new ones were assigned.
        everyone = len(consumers) > partitions or all(c.assignment() for c in consumers)
        if sorted(owned) == list(range(partitions)) and everyone:
            # Stable for a moment, not caught between revocation and assignment.
            time.sleep(0.5)
            for c in consumers:
                c.poll(0)
            owned = [tp.partition for c in consumers for tp in c.assignment()]
            if sorted(owned) == list(range(partitions)):
                return
        time.sleep(0.05)
    raise AssertionError(f"never settled: {sorted(tp.partition for c in consumers for tp in c.assignment())}")


consumers = [member("churn") for _ in range(members)]
settle(consumers)
for r in range(rounds):
    leaving, consumers = consumers[: members // 2], consumers[members // 2:]
    for c in leaving:
        c.close()
    consumers += [member("churn") for _ in range(members // 2)]
    settle(consumers)
for c in consumers:
    c.close()
print(f"churn: {members} members, {rounds} rounds of half leaving and rejoining, every partition owned once")

# A member killed without leaving loses its partitions after its session timeout.
victim = subprocess.Popen([sys.executable, "-c", f"""
from confluent_kafka import Consumer
import time
c = Consumer({{"bootstrap.servers": "{bootstrap}", "group.id": "killed", "session.timeout.ms": 6000,
              "heartbeat.interval.ms": 500}})
c.subscribe(["{topic}"])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""], stdout=subprocess.PIPE)
assert victim.stdout.readline().strip() == b"assigned"
os.kill(victim.pid, signal.SIGKILL)
victim.wait()
started = time.time()
survivor = member("killed")
settle([survivor], timeout=60)
waited = time.time() - started
survivor.close()
assert waited >= 3, f"took over after {waited:.1f}s, before the victim's session could expire"
print(f"killed member's partitions taken over after {waited:.1f}s (session timeout 6s)")
