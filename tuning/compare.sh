#!/usr/bin/env bash
# Compares weir's tuning profiles on this machine and writes tuning/RESULTS.md with the
# tables and plots. For each profile it starts weir (one shard pinned to core 1) on a
# fresh data directory, drives it with loadgen (pinned to core 0), and stops it:
#   max   open throttle, 1 KiB messages, acks=all, one partition: maximum throughput
#   half  the same at a fixed rate of half the `default` profile's maximum
#   low   the same at a tenth of it
#   many  200 partitions at 100 msgs/s each (20,000 msgs/s), acks=all
# then the step load of benches/step_load.sh (the adaptive group commit's interval
# under a load that steps up and down),
# and once, against `no-fsync`, loadgen's producer vs confluent-kafka's (librdkafka) with
# the same message size, batching, acks and partitions (8, so the broker is not the
# limit).
# Every profile's scenarios run REPEATS times, the profiles interleaved (so a slow
# minute of the disk does not land on one profile), and the targets take the median of
# the repeats: single runs of a latency percentile swing 2-5x on this machine. Tables
# and plots show the first repeat.
# Run it on an idle machine (a compile beside it ruins the latency figures).
# Usage: bash tuning/compare.sh        env: DURATION (20s), WARMUP (5s), REPEATS (3)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-20s}
WARMUP=${WARMUP:-5s}
REPEATS=${REPEATS:-3}
PROFILES=(default fixed-1ms low-latency max-throughput shared no-fsync)
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

# produce SCENARIO PROFILE [loadgen options...]: one loadgen run into
# $runs/SCENARIO/PROFILE (the first repeat) or $runs/rN/SCENARIO/PROFILE (repeat N).
produce() {
  local scenario=$1 profile=$2 out
  shift 2
  out=$runs/$scenario/$profile
  [ "${rep:-1}" = 1 ] || out=$runs/r$rep/$scenario/$profile
  echo "== $scenario / $profile${rep:+ (repeat $rep)}"
  "$lg" produce --bootstrap 127.0.0.1:$PORT --cores $LOADGEN_CORE --message-size 1024 \
    --acks all --warmup "$WARMUP" --duration "$DURATION" --label "$profile" \
    --profile "$profile" --out "$out" "$@"
}

throughput() {
  jq -r '.produce.messages_per_second' "$1/summary.json"
}

half_rate=""
for rep in $(seq 1 "$REPEATS"); do
  for profile in "${PROFILES[@]}"; do
    start_broker $PORT --config "tuning/$profile.toml"
    produce max "$profile" --topic max --partitions 1 --batch-bytes $BATCH
    if [ -z "$half_rate" ]; then
      half_rate=$(jq -r '.produce.messages_per_second / 2 | floor' "$runs/max/default/summary.json")
    fi
    produce half "$profile" --topic half --partitions 1 --batch-bytes $BATCH --rate "$half_rate"
    produce low "$profile" --topic low --partitions 1 --batch-bytes $BATCH --rate "$((half_rate / 5))"
    produce many "$profile" --topic many --partitions 200 --rate 20000
    stop_broker
  done
done
unset rep

echo "== loadgen vs confluent-kafka, no-fsync"
start_broker $PORT --config tuning/no-fsync.toml
produce reference loadgen --topic ref-loadgen --partitions 8 --batch-bytes $BATCH
"$lg" produce --bootstrap 127.0.0.1:$PORT --topic ref-confluent --partitions 8 --messages 1 \
  --out "$runs/reference/create" > /dev/null
taskset -c $LOADGEN_CORE "$py" tuning/confluent_produce.py 127.0.0.1:$PORT ref-confluent \
  3000000 1024 $BATCH 8 > "$runs/reference/confluent.json"
stop_broker
cat "$runs/reference/confluent.json"

echo "== step load (default profile)"
bash benches/step_load.sh

tables=()
for scenario in max half low many; do
  dirs=()
  for profile in "${PROFILES[@]}"; do dirs+=("$runs/$scenario/$profile"); done
  "$lg" compare "${dirs[@]}" --metric produce --markdown --plot "tuning/results/$scenario.svg" \
    > "$runs/$scenario.md"
done

"$py" - "$runs" "$half_rate" "$DURATION" "$WARMUP" "$REPEATS" > tuning/RESULTS.md <<'PY'
import json, os, platform, statistics, subprocess, sys
runs, half_rate, duration, warmup = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
repeats = int(sys.argv[5])
profiles = ["default", "fixed-1ms", "low-latency", "max-throughput", "shared", "no-fsync"]
fixed = ["fixed-1ms", "low-latency", "max-throughput"]
def summary(*parts):
    return json.load(open(os.path.join(runs, *parts, "summary.json")))
def median(scenario, profile, value):
    """The median over the repeats of value(summary) for one cell."""
    dirs = [(scenario, profile)] + [(f"r{r}", scenario, profile) for r in range(2, repeats + 1)]
    return statistics.median(value(summary(*d)) for d in dirs)
def latencies(scenario, profile):
    keys = ["p50", "p99", "p99_99"]
    return {k: median(scenario, profile, lambda s: s["latency_ms"]["produce"][k]) for k in keys}
def table(name):
    return "".join(l for l in open(os.path.join(runs, name + ".md")) if not l.startswith("plot:"))
def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
mem = sh("free -g | awk '/Mem:/ {print $2}'")
disk = sh("df -hT . | tail -1 | awk '{print $1\" (\"$2\", \"$3\")\"}'")
commit = sh("git rev-parse --short HEAD")
mx = {p: median("max", p, lambda s: s["produce"]["messages_per_second"]) for p in profiles}
half = {p: latencies("half", p) for p in profiles}
low = {p: latencies("low", p) for p in profiles}
best_max = max(fixed, key=lambda p: mx[p])
best_half = min(fixed, key=lambda p: half[p]["p99"])
many = {p: latencies("many", p) for p in profiles}
ref_loadgen = summary("reference", "loadgen")["produce"]["messages_per_second"]
ref_confluent = json.load(open(os.path.join(runs, "reference", "confluent.json")))["messages_per_second"]
def mark(ok):
    return "met" if ok else "**not met**"
print(f"""# Tuning profiles compared

Measured by `bash tuning/compare.sh` on {sh('date -u +%Y-%m-%d')} at commit `{commit}`, on an
idle machine: {os.cpu_count()} vCPUs ({cpu}), {mem} GiB memory, Linux {platform.release()},
data on {disk}. weir runs one shard pinned to core 1, loadgen runs pinned to core 0;
every run is {warmup} of warm-up (left out) and {duration} measured, 1 KiB messages,
acks=all. Each profile starts on a fresh data directory. Every cell ran {repeats} times,
the profiles interleaved; **the targets use the median of the {repeats}** and the tables
and plots below show the first run. Raw results (summary.json, .hlog, .hgrm per run)
are in `{runs}` on the machine that ran it.

Profiles (`tuning/*.toml`): **default** (the adaptive group commit, `--flush-target-p99 2ms`,
poll 500 µs before sleeping), **fixed-1ms** (the default before it: a round every 1 ms,
no polling), **low-latency** (commit as soon as the shard is free, poll 500 µs before
sleeping), **max-throughput** (commit after 200 µs or 64 MiB, poll before sleeping,
bigger buffers), **shared** (the default without polling: for machines shared with other
work, and the test suite), **no-fsync** (the default made write-only: NOT durable, the
reference for what durability costs).

## Targets (medians of {repeats} runs)

| target | measured | |
|---|---|---|
| loadgen is not the bottleneck: its producer ≥ 1.5× confluent-kafka's against no-fsync (8 partitions) | loadgen {ref_loadgen:,.0f} msgs/s, confluent-kafka {ref_confluent:,.0f} msgs/s: **{ref_loadgen / ref_confluent:.2f}×** | {mark(ref_loadgen >= 1.5 * ref_confluent)} |
| default max durable throughput ≥ 0.9 × no-fsync (same run) | {mx['default']:,.0f} / {mx['no-fsync']:,.0f} msgs/s = **{mx['default'] / mx['no-fsync']:.2f}** | {mark(mx['default'] >= 0.9 * mx['no-fsync'])} |
| at 50% of default max ({half_rate:,} msgs/s), low-latency: p99 ≤ 1 ms, p99.99 ≤ 5 ms | p99 **{half['low-latency']['p99']:.3f} ms**, p99.99 **{half['low-latency']['p99_99']:.3f} ms** | {mark(half['low-latency']['p99'] <= 1 and half['low-latency']['p99_99'] <= 5)} |
| 200 partitions × 100 msgs/s, acks=all: p99 ≤ 2 ms | """ + ", ".join(f"{p} {many[p]['p99']:.3f} ms" for p in profiles) + f""" | {mark(min(many[p]['p99'] for p in profiles if p != 'no-fsync') <= 2)} (best durable profile) |
| adaptive (default) max durable throughput ≥ 0.95 × the best fixed profile's ({best_max}) | {mx['default']:,.0f} / {mx[best_max]:,.0f} msgs/s = **{mx['default'] / mx[best_max]:.2f}** | {mark(mx['default'] >= 0.95 * mx[best_max])} |
| adaptive p99 at 50% ≤ 1.1 × the best fixed profile's ({best_half}) | {half['default']['p99']:.3f} / {half[best_half]['p99']:.3f} ms = **{half['default']['p99'] / half[best_half]['p99']:.2f}** | {mark(half['default']['p99'] <= 1.1 * half[best_half]['p99'])} |
| at 50%: durable p99 ≤ 1.2 × write-only p99 (default vs no-fsync) | {half['default']['p99']:.3f} / {half['no-fsync']['p99']:.3f} ms = **{half['default']['p99'] / half['no-fsync']['p99']:.2f}** | {mark(half['default']['p99'] <= 1.2 * half['no-fsync']['p99'])} |
| at 10%: durable p50 ≤ 1.5 × write-only p50 | {low['default']['p50']:.3f} / {low['no-fsync']['p50']:.3f} ms = **{low['default']['p50'] / low['no-fsync']['p50']:.2f}** | {mark(low['default']['p50'] <= 1.5 * low['no-fsync']['p50'])} |
| 200 partitions: durable p99 ≤ 1.5 × write-only p99 | {many['default']['p99']:.3f} / {many['no-fsync']['p99']:.3f} ms = **{many['default']['p99'] / many['no-fsync']['p99']:.2f}** | {mark(many['default']['p99'] <= 1.5 * many['no-fsync']['p99'])} |

## Maximum throughput (open throttle, one partition, {262144 // 1024} KiB batches)

{table('max')}
![max](results/max.svg)

## Fixed rate: {half_rate:,} msgs/s (half the default profile's maximum), one partition

Latency counts from each message's scheduled send time, so a stall shows up in full.

{table('half')}
![half](results/half.svg)

## Fixed rate: {half_rate // 5:,} msgs/s (a tenth of the default profile's maximum), one partition

{table('low')}
![low](results/low.svg)

## 200 partitions at 100 msgs/s each

{table('many')}
![many](results/many.svg)

## The adaptive group commit under a step load

`bash benches/step_load.sh` (run by this script): the default profile, one partition,
10% → 30% → 60% → 90% → 100% → 60% → 30% → 10% of the measured maximum, 8 s a step;
the produce rate, the interval the controller chose (`weir_flush_interval_seconds`,
read every 200 ms) and the produce p99, per second.

![step load](results/step-load.svg)
""")
PY
echo "wrote tuning/RESULTS.md"
