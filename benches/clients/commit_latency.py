"""OffsetCommit throughput and latency next to produce (acks=all) latency, in one run,
through confluent-kafka. THREADS clients each commit 16 partitions per request to one
group (simple consumers: no membership, generation -1), while THREADS producers send one
1 KiB message at a time with acks=all and wait for each delivery report.
Prints one JSON line. Usage: commit_latency.py BOOTSTRAP SECONDS THREADS"""
import json
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, seconds, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
for f in admin.create_topics([NewTopic("commits", num_partitions=16, replication_factor=1),
                              NewTopic("produce-latency", num_partitions=4, replication_factor=1)]).values():
    f.result(timeout=10)
stop = time.time() + seconds
commit_latencies, produce_latencies = [], []
lock = threading.Lock()


def committer(n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-commits", "enable.auto.commit": False})
    mine, offset = [], 0
    while time.time() < stop:
        offset += 1
        tps = [TopicPartition("commits", p, offset) for p in range(16)]
        started = time.perf_counter()
        c.commit(offsets=tps, asynchronous=False)
        mine.append(time.perf_counter() - started)
    c.close()
    with lock:
        commit_latencies.extend(mine)


def producer(n):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    mine, payload = [], b"p" * 1024
    while time.time() < stop:
        done = []
        started = time.perf_counter()
        p.produce("produce-latency", value=payload, on_delivery=lambda err, msg: done.append(err))
        while not done:
            p.poll(0.0005)
        assert done[0] is None, done[0]
        mine.append(time.perf_counter() - started)
    with lock:
        produce_latencies.extend(mine)


workers = [threading.Thread(target=committer, args=(i,)) for i in range(threads)]
workers += [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


print(json.dumps({
    "commits_per_s": len(commit_latencies) / seconds,
    "partition_offsets_per_s": 16 * len(commit_latencies) / seconds,
    "commit_p50_ms": pct(commit_latencies, 0.5), "commit_p99_ms": pct(commit_latencies, 0.99),
    "produce_p50_ms": pct(produce_latencies, 0.5), "produce_p99_ms": pct(produce_latencies, 0.99),
    "produces_per_s": len(produce_latencies) / seconds,
}))
