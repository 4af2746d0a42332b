#!/usr/bin/env bash
# Metadata figures of a three-host cluster on loopback (hosts 127.0.0.1-3, one shard
# each, release build, auto-creation off):
#  - CreateTopics -> the topic in every host's Metadata: p50/p99 over CREATES (100)
#    one-partition creates sent one after another to host 1, each polled on all hosts;
#  - topic creates per second through the quorum: BULK (500) creates as 50 concurrent
#    CreateTopics requests of 10 topics, spread over the three hosts;
#  - controller CPU per idle second: the `controller` thread's utime+stime over IDLE (20)
#    seconds of no client traffic, on the Raft leader and on a follower.
# Writes target/bench-data/cluster-metadata.json and tuning/results/cluster-metadata.svg
# (the distribution of create-to-visible times).
#
#   bash benches/cluster_metadata.sh
#
# Run on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
CREATES=${CREATES:-100}
BULK=${BULK:-500}
IDLE=${IDLE:-20}
PORT=${PORT:-29492}
CPORT=${CPORT:-29491}
source benches/broker.sh
start_cluster "$PORT" "$CPORT"
"$py" - "$PORT" "$CPORT" "$CREATES" "$BULK" "$IDLE" "${pids[@]}" <<'PY'
import json, os, statistics, subprocess, sys, time
from concurrent.futures import wait
from confluent_kafka.admin import AdminClient, NewTopic

port, cport, creates, bulk, idle = (int(a) for a in sys.argv[1:6])
pids = [int(p) for p in sys.argv[6:]]
hosts = [f"127.0.0.{i}:{port}" for i in (1, 2, 3)]
admins = [AdminClient({"bootstrap.servers": h}) for h in hosts]
for a in admins:
    a.list_topics(timeout=10)

def visible(admin, name):
    md = admin.list_topics(topic=name, timeout=5)
    t = md.topics.get(name)
    return t is not None and t.error is None and len(t.partitions) > 0

acked, seen = [], []
for i in range(creates):
    name = f"lat-{i}"
    t0 = time.perf_counter()
    admins[0].create_topics([NewTopic(name, 1, 1)])[name].result(timeout=20)
    t1 = time.perf_counter()
    pending = set(range(3))
    while pending:
        for h in list(pending):
            if visible(admins[h], name):
                pending.discard(h)
    t2 = time.perf_counter()
    acked.append((t1 - t0) * 1000)
    seen.append((t2 - t0) * 1000)

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]

t0 = time.perf_counter()
futures = []
for r in range(bulk // 10):
    topics = [NewTopic(f"bulk-{r}-{k}", 1, 1) for k in range(10)]
    futures += list(admins[r % 3].create_topics(topics, request_timeout=60).values())
wait(futures)
for f in futures:
    f.result()
elapsed = time.perf_counter() - t0
rate = len(futures) / elapsed

status = json.loads(subprocess.check_output(
    ["target/release/weir", "cluster", "status", "--controller", f"127.0.0.1:{cport}", "--json"]))
leader = status["leader"]

def controller_ticks(pid):
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if open(f"/proc/{pid}/task/{tid}/comm").read().strip() == "controller":
                f = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                return int(f[11]) + int(f[12])
        except FileNotFoundError:
            pass
    return 0

time.sleep(2)
before = [controller_ticks(p) for p in pids]
time.sleep(idle)
after = [controller_ticks(p) for p in pids]
hz = os.sysconf("SC_CLK_TCK")
cpu = [(a - b) / hz / idle * 1000 for a, b in zip(after, before)]  # ms of CPU per second
follower = next(i for i in (1, 2, 3) if i != leader)
result = {
    "creates": creates,
    "ack_ms": {"p50": pct(acked, 0.5), "p99": pct(acked, 0.99)},
    "visible_everywhere_ms": {"p50": pct(seen, 0.5), "p99": pct(seen, 0.99), "max": max(seen)},
    "bulk_creates": len(futures),
    "creates_per_second": rate,
    "controller_cpu_ms_per_idle_second": {"leader": cpu[leader - 1], "follower": cpu[follower - 1]},
}
json.dump(result, open("target/bench-data/cluster-metadata.json", "w"), indent=2)
print(json.dumps(result, indent=2))

# The distribution as an SVG: every create, sorted (a CDF turned on its side), the time
# to the acknowledgement and to visibility on every host, on a log scale (a rare slow
# create must not flatten the rest).
import math
w, h, pad = 640, 360, 50
lo = math.log10(max(0.1, min(acked) * 0.8))
hi = math.log10(max(seen) * 1.25)
def xy(i, v):
    y = (math.log10(max(v, 0.1)) - lo) / (hi - lo)
    return pad + (w - 2 * pad) * i / max(1, len(seen) - 1), h - pad - (h - 2 * pad) * y
lines = []
for series, colour in ((sorted(acked), "#888"), (sorted(seen), "#1f77b4")):
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in enumerate(series)))
    lines.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts}"/>')
marks = [m * 10 ** e for e in range(-1, 4) for m in (1, 2, 5) if lo <= math.log10(m * 10 ** e) <= hi]
ticks = "".join(
    f'<text x="{pad - 6}" y="{xy(0, v)[1] + 4:.1f}" text-anchor="end" font-size="11">{v:g}</text>'
    f'<line x1="{pad}" x2="{w - pad}" y1="{xy(0, v)[1]:.1f}" y2="{xy(0, v)[1]:.1f}" stroke="#eee"/>'
    for v in marks)
svg = f'''<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif">
<rect width="{w}" height="{h}" fill="white"/>{ticks}{"".join(lines)}
<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">CreateTopics on a 3-host cluster ({creates} creates, sorted)</text>
<text x="{w / 2}" y="{h - 12}" text-anchor="middle" font-size="11">creates, fastest to slowest</text>
<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle" font-size="11">ms since the request (log scale)</text>
<text x="{pad + 10}" y="45" font-size="11" fill="#888">acknowledged (p50 {pct(acked, .5):.1f} ms, p99 {pct(acked, .99):.1f} ms)</text>
<text x="{pad + 10}" y="60" font-size="11" fill="#1f77b4">in every host's Metadata (p50 {pct(seen, .5):.1f} ms, p99 {pct(seen, .99):.1f} ms)</text>
</svg>'''
open("tuning/results/cluster-metadata.svg", "w").write(svg)
PY
