"""A two-member confluent-kafka group on a cluster, in two phases.
  cluster_group.py first BOOTSTRAP TOPIC GROUP COUNT KEYS_FILE
      create the topic (6 partitions), produce COUNT keyed messages, two members split
      the partitions, consume about half, commit, close
  cluster_group.py second BOOTSTRAP TOPIC GROUP COUNT KEYS_FILE
      two new members resume from the committed offsets: nothing re-delivered, nothing
      missing"""
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

phase, bootstrap, topic, group, count, keys_file = sys.argv[1:7]
count = int(count)


def member():
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    return c


def settle(members, got):
    """Polls until both members are assigned; what arrives meanwhile goes to `got`."""
    deadline = time.time() + 60
    while not all(m.assignment() for m in members):
        assert time.time() < deadline, "the group did not assign both members"
        for m in members:
            msg = m.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.key().decode())
    parts = [{tp.partition for tp in m.assignment()} for m in members]
    assert not parts[0] & parts[1], f"members share partitions: {parts}"
    assert parts[0] | parts[1] == set(range(6)), f"partitions unassigned: {parts}"
    return parts


def consume(members, want, got):
    deadline = time.time() + 60
    while len(set(got)) < want and time.time() < deadline:
        for m in members:
            msg = m.poll(0.1)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.key().decode())
    return got


if phase == "first":
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)]).values():
        f.result(timeout=20)
    # The group settles before anything is produced, so no member consumes what a
    # rebalance then hands to the other.
    members = [member(), member()]
    got = []
    parts = settle(members, got)
    assert not got, "nothing produced yet"
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
    assert p.flush(30) == 0
    consume(members, count // 2, got)
    assert len(got) >= count // 2, f"consumed {len(got)} of {count // 2}"
    for m in members:
        m.commit(asynchronous=False)
        m.close()
    open(keys_file, "w").write("\n".join(got))
    print(f"two members split {parts}, consumed and committed {len(got)}")
else:
    first = set(open(keys_file).read().split("\n"))
    members = [member(), member()]
    second = []
    settle(members, second)
    consume(members, count - len(first), second)
    for m in members:
        m.close()
    assert not first & set(second), "nothing re-delivered after the restart"
    assert first | set(second) == {f"k{i}" for i in range(count)}, "nothing missing"
    print(f"resumed with {len(second)} after the restart")
