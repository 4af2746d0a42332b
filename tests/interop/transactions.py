"""confluent-kafka (librdkafka) transactions against weir: commit, abort, read_committed
against read_uncommitted, the last stable offset held by an open transaction, a zombie
fenced by a new instance, and consume-transform-produce with send_offsets_to_transaction
(committed offsets appear only with the commit; an aborted run leaves them).
Usage: transactions.py BOOTSTRAP TOPIC"""
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
out = topic + "-out"
PARTITIONS = 4
admin = AdminClient({"bootstrap.servers": bootstrap})
for future in admin.create_topics(
    [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in (topic, out)]
).values():
    future.result(timeout=10)


def producer(txn_id):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    return p


def send(p, prefix, n, to=topic):
    for i in range(n):
        p.produce(to, key=f"{prefix}-{i}", value=f"{prefix}-{i}", partition=i % PARTITIONS)
    p.flush(30)


def read(isolation, to=topic, expect=None, seconds=10.0):
    """Keys readable from the start of every partition of `to`, until `expect` keys or
    nothing new for a while."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + isolation,
                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([TopicPartition(to, p, 0) for p in range(PARTITIONS)])
    keys, deadline = [], time.time() + seconds
    while time.time() < deadline and (expect is None or len(keys) < expect):
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        keys.append(m.key().decode())
    c.close()
    return keys


p = producer("tx-1")
p.begin_transaction()
send(p, "committed", 10)
p.commit_transaction(30)
p.begin_transaction()
send(p, "aborted", 10)
p.abort_transaction(30)
p.begin_transaction()
send(p, "later", 6)
p.commit_transaction(30)

committed = read("read_committed", expect=16, seconds=8)
assert sorted(committed) == sorted([f"committed-{i}" for i in range(10)] + [f"later-{i}" for i in range(6)]), committed
assert len(set(committed)) == len(committed), "duplicates"
uncommitted = read("read_uncommitted", expect=26, seconds=8)
assert len(uncommitted) == 26 and sum(k.startswith("aborted") for k in uncommitted) == 10, uncommitted
print("commit and abort: read_committed saw 16 committed records, read_uncommitted all 26")

# An open transaction holds the LSO: read_committed readers wait for it.
p.begin_transaction()
send(p, "open", 4)
seen = read("read_committed", expect=20, seconds=3)
assert not any(k.startswith("open") for k in seen), "read past the LSO"
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
c.close()
p.commit_transaction(30)
seen = read("read_committed", expect=20, seconds=8)
assert sum(k.startswith("open") for k in seen) == 4, seen
print(f"an open transaction held read_committed readers back (partition 0 high {high}) until it committed")

# A new instance with the same transactional id fences the old one.
p.begin_transaction()
send(p, "zombie", 4)
p2 = producer("tx-1")
try:
    p.commit_transaction(30)
    raise AssertionError("the zombie committed")
except KafkaException as e:
    assert e.args[0].fatal() or e.args[0].txn_requires_abort(), e
seen = read("read_committed", expect=20, seconds=4)
assert not any(k.startswith("zombie") for k in seen), "a fenced transaction became visible"
print("a second instance fenced the first; the zombie's records stayed invisible")

# Consume-transform-produce: offsets commit only with the transaction.
group = "ctp"
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
batch, deadline = [], time.time() + 20
while len(batch) < 20 and time.time() < deadline:
    m = consumer.poll(0.5)
    if m is not None and not m.error():
        batch.append(m)
assert len(batch) == 20, len(batch)


def positions():
    ends = {}
    for m in batch:
        ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
    return [TopicPartition(topic, part, off) for part, off in ends.items()]


def committed_offsets():
    return {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic, q) for q in range(PARTITIONS)], timeout=10)}


p2.begin_transaction()
for m in batch:
    p2.produce(out, key=m.key(), value=m.value().upper(), partition=m.partition())
p2.send_offsets_to_transaction(positions(), consumer.consumer_group_metadata(), 30)
p2.abort_transaction(30)
assert all(o < 0 for o in committed_offsets().values()), committed_offsets()
p2.begin_transaction()
for m in batch:
    p2.produce(out, key=m.key(), value=m.value().upper(), partition=m.partition())
p2.send_offsets_to_transaction(positions(), consumer.consumer_group_metadata(), 30)
p2.commit_transaction(30)
want = {tp.partition: tp.offset for tp in positions()}
got = committed_offsets()
assert all(got[q] == o for q, o in want.items()), (got, want)
consumer.close()
outputs = read("read_committed", to=out, expect=20, seconds=8)
assert sorted(outputs) == sorted(m.key().decode() for m in batch), outputs
print("consume-transform-produce: the aborted run committed nothing, the committed one its offsets and 20 outputs")

# Leave a transaction open, as a producer that died mid-transaction does, for the
# harness to find and abort with `weir transactions`.
hanging = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-hanging",
                    "transaction.timeout.ms": 600000})
hanging.init_transactions(30)
hanging.begin_transaction()
send(hanging, "hanging", 3)
print("left transactional id tx-hanging with an open transaction")
os._exit(0)
