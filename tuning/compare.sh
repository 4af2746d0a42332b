#!/usr/bin/env bash
# Compares weir's tuning profiles on this machine and writes tuning/RESULTS.md with the
# tables and plots. For each profile it starts weir (one shard pinned to core 1) on a
# fresh data directory, drives it with loadgen (pinned to core 0), and stops it:
#   max   open throttle, 1 KiB messages, acks=all, one partition: maximum throughput
#   half  the same at a fixed rate of half the `default` profile's maximum
#   many  200 partitions at 100 msgs/s each (20,000 msgs/s), acks=all
# and once, against `no-fsync`, loadgen's producer vs confluent-kafka's (librdkafka) with
# the same message size, batching, acks and partitions (8, so the broker is not the
# limit).
# Run it on an idle machine (a compile beside it ruins the latency figures).
# Usage: bash tuning/compare.sh        env: DURATION (20s), WARMUP (5s)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20s}
WARMUP=${WARMUP:-5s}
PROFILES=(default low-latency max-throughput no-fsync)
PORT=29092
LOADGEN_CORE=0
BATCH=262144

# `loadgen compare` writes PNG copies of its plots when librsvg is installed.
command -v rsvg-convert > /dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq librsvg2-bin > /dev/null 2>&1 || true

source benches/broker.sh
cargo build --release --quiet -p loadgen
lg=target/release/loadgen
runs=target/tuning-runs/$(date +%Y%m%d-%H%M%S)
mkdir -p "$runs" tuning/results

# produce SCENARIO PROFILE [loadgen options...]: one loadgen run into $runs/SCENARIO/PROFILE.
produce() {
  local scenario=$1 profile=$2
  shift 2
  echo "== $scenario / $profile"
  "$lg" produce --bootstrap 127.0.0.1:$PORT --cores $LOADGEN_CORE --message-size 1024 \
    --acks all --warmup "$WARMUP" --duration "$DURATION" --label "$profile" \
    --profile "$profile" --out "$runs/$scenario/$profile" "$@"
}

throughput() {
  jq -r '.produce.messages_per_second' "$1/summary.json"
}

half_rate=""
for profile in "${PROFILES[@]}"; do
  start_broker $PORT --config "tuning/$profile.toml"
  produce max "$profile" --topic max --partitions 1 --batch-bytes $BATCH
  if [ -z "$half_rate" ]; then
    half_rate=$(jq -r '.produce.messages_per_second / 2 | floor' "$runs/max/default/summary.json")
  fi
  produce half "$profile" --topic half --partitions 1 --batch-bytes $BATCH --rate "$half_rate"
  produce many "$profile" --topic many --partitions 200 --rate 20000
  stop_broker
done

echo "== loadgen vs confluent-kafka, no-fsync"
start_broker $PORT --config tuning/no-fsync.toml
produce reference loadgen --topic ref-loadgen --partitions 8 --batch-bytes $BATCH
"$lg" produce --bootstrap 127.0.0.1:$PORT --topic ref-confluent --partitions 8 --messages 1 \
  --out "$runs/reference/create" > /dev/null
taskset -c $LOADGEN_CORE "$py" tuning/confluent_produce.py 127.0.0.1:$PORT ref-confluent \
  3000000 1024 $BATCH 8 > "$runs/reference/confluent.json"
stop_broker
cat "$runs/reference/confluent.json"

tables=()
for scenario in max half many; do
  dirs=()
  for profile in "${PROFILES[@]}"; do dirs+=("$runs/$scenario/$profile"); done
  "$lg" compare "${dirs[@]}" --metric produce --markdown --plot "tuning/results/$scenario.svg" \
    > "$runs/$scenario.md"
done

"$py" - "$runs" "$half_rate" "$DURATION" "$WARMUP" > tuning/RESULTS.md <<'PY'
import json, os, platform, subprocess, sys
runs, half_rate, duration, warmup = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
profiles = ["default", "low-latency", "max-throughput", "no-fsync"]
def summary(*parts):
    return json.load(open(os.path.join(runs, *parts, "summary.json")))
def table(name):
    return "".join(l for l in open(os.path.join(runs, name + ".md")) if not l.startswith("plot:"))
def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
mem = sh("free -g | awk '/Mem:/ {print $2}'")
disk = sh("df -hT . | tail -1 | awk '{print $1\" (\"$2\", \"$3\")\"}'")
commit = sh("git rev-parse --short HEAD")
mx = {p: summary("max", p)["produce"]["messages_per_second"] for p in profiles}
half = {p: summary("half", p)["latency_ms"]["produce"] for p in profiles}
many = {p: summary("many", p)["latency_ms"]["produce"] for p in profiles}
ref_loadgen = summary("reference", "loadgen")["produce"]["messages_per_second"]
ref_confluent = json.load(open(os.path.join(runs, "reference", "confluent.json")))["messages_per_second"]
def mark(ok):
    return "met" if ok else "**not met**"
print(f"""# Tuning profiles compared

Measured by `bash tuning/compare.sh` on {sh('date -u +%Y-%m-%d')} at commit `{commit}`, on an
idle machine: {os.cpu_count()} vCPUs ({cpu}), {mem} GiB memory, Linux {platform.release()},
data on {disk}. weir runs one shard pinned to core 1, loadgen runs pinned to core 0;
every run is {warmup} of warm-up (left out) and {duration} measured, 1 KiB messages,
acks=all. Each profile starts on a fresh data directory. Raw results (summary.json,
.hlog, .hgrm per run) are in `{runs}` on the machine that ran it.

Profiles (`tuning/*.toml`): **default** (group commit every 1 ms), **low-latency**
(commit as soon as the shard is free, poll 500 µs before sleeping), **max-throughput**
(commit after 200 µs or 64 MiB, poll before sleeping, bigger buffers), **no-fsync** (write-only: NOT durable,
for comparison only).

## Targets

| target | measured | |
|---|---|---|
| loadgen is not the bottleneck: its producer ≥ 1.5× confluent-kafka's against no-fsync (8 partitions) | loadgen {ref_loadgen:,.0f} msgs/s, confluent-kafka {ref_confluent:,.0f} msgs/s: **{ref_loadgen / ref_confluent:.2f}×** | {mark(ref_loadgen >= 1.5 * ref_confluent)} |
| default max durable throughput ≥ 0.9 × no-fsync (same run) | {mx['default']:,.0f} / {mx['no-fsync']:,.0f} msgs/s = **{mx['default'] / mx['no-fsync']:.2f}** | {mark(mx['default'] >= 0.9 * mx['no-fsync'])} |
| at 50% of default max ({half_rate:,} msgs/s), low-latency: p99 ≤ 1 ms, p99.99 ≤ 5 ms | p99 **{half['low-latency']['p99']:.3f} ms**, p99.99 **{half['low-latency']['p99_99']:.3f} ms** | {mark(half['low-latency']['p99'] <= 1 and half['low-latency']['p99_99'] <= 5)} |
| 200 partitions × 100 msgs/s, acks=all: p99 ≤ 2 ms | """ + ", ".join(f"{p} {many[p]['p99']:.3f} ms" for p in profiles) + f""" | {mark(min(many[p]['p99'] for p in profiles if p != 'no-fsync') <= 2)} (best durable profile) |

## Maximum throughput (open throttle, one partition, {262144 // 1024} KiB batches)

{table('max')}
![max](results/max.svg)

## Fixed rate: {half_rate:,} msgs/s (half the default profile's maximum), one partition

Latency counts from each message's scheduled send time, so a stall shows up in full.

{table('half')}
![half](results/half.svg)

## 200 partitions at 100 msgs/s each

{table('many')}
![many](results/many.svg)
""")
PY
echo "wrote tuning/RESULTS.md"
