#!/usr/bin/env bash
# Replication factor 3 against 1 on the same three-host cluster in the same run: hosts
# 127.0.0.1-3 with one shard each (release build; hosts 1 and 3 on core 1, host 2 and
# loadgen on core 0 — this machine has two), a topic of 3 partitions (one led by each
# host) per factor, loadgen producing 1 KiB messages with acks=all:
#  1. open throttle for DURATION seconds: maximum acknowledged throughput;
#  2. a fixed rate both sustain, RATE_SHARE (0.5) of the lower maximum (RF 3's):
#     p50/p99/p99.9 latency.
# Each phase alternates which factor goes first, RUNS times; the table gives medians and
# the RF 3 / RF 1 ratio. `loadgen compare` draws the latency distributions of the last
# run's fixed-rate phase to tuning/results/replication.svg. Each topic is deleted after
# its run (three copies of an open-throttle run take tens of GB).
#
#   bash benches/replication_ab.sh
#   RUNS=5 DURATION=15 bash benches/replication_ab.sh
#
# Run on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
RATE_SHARE=${RATE_SHARE:-0.5}
PORT=${PORT:-29792}
CPORT=${CPORT:-29791}
source benches/broker.sh
cargo build --release --quiet -p loadgen
start_cluster "$PORT" "$CPORT"
sleep 2
results=target/bench-data/replication-ab.jsonl
: > "$results"
runs=$dir/runs
mkdir -p "$runs"
lg() {  # lg RF LABEL [extra loadgen flags...]: prints the run directory
  local rf=$1 label=$2
  shift 2
  local topic="rf$rf-$label"
  target/release/weir topics --bootstrap 127.0.0.1:"$PORT" create "$topic" --partitions 3 \
    --replication-factor "$rf" > /dev/null
  sleep 1
  target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" --topic "$topic" \
    --message-size 1024 --batch-bytes 65536 --acks all --cores 0 --label "RF $rf" \
    --out "$runs/$label-rf$rf" --duration "${DURATION}s" --warmup 3s "$@" \
    > "$runs/$label-rf$rf.log" 2>&1 || { cat "$runs/$label-rf$rf.log" >&2; exit 1; }
  # Three copies of an open-throttle run fill a disk quickly: each topic goes after its run.
  target/release/weir topics --bootstrap 127.0.0.1:"$PORT" delete "$topic" > /dev/null
  echo "$runs/$label-rf$rf"
}
record() {  # record RUN PHASE RF DIR
  "$py" - "$@" "$results" <<'PY'
import json, sys
run, phase, rf, out, results = sys.argv[1:6]
s = json.load(open(f"{out}/summary.json"))
lat = s["latency_ms"]["produce"]
row = {"run": int(run), "phase": phase, "rf": int(rf), "msgs_per_s": s["produce"]["messages_per_second"],
       "p50_ms": lat["p50"], "p99_ms": lat["p99"], "p999_ms": lat["p99_9"]}
open(results, "a").write(json.dumps(row) + "\n")
print(f"run {run} {phase} RF {rf}: {row['msgs_per_s']:,.0f} msgs/s, p50 {row['p50_ms']:.2f} ms, "
      f"p99 {row['p99_ms']:.2f} ms, p99.9 {row['p999_ms']:.2f} ms", file=sys.stderr)
PY
}
for run in $(seq 1 "$RUNS"); do
  order="1 3"
  if [ $((run % 2)) -eq 0 ]; then order="3 1"; fi
  for rf in $order; do
    record "$run" max "$rf" "$(lg "$rf" "max-$run")"
  done
done
rate=$("$py" - "$results" "$RATE_SHARE" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# A rate both factors sustain: a share of the lower maximum.
print(int(float(sys.argv[2]) * min(statistics.median(r["msgs_per_s"] for r in rows if r["rf"] == rf)
                                   for rf in (1, 3))))
PY
)
for run in $(seq 1 "$RUNS"); do
  order="1 3"
  if [ $((run % 2)) -eq 0 ]; then order="3 1"; fi
  for rf in $order; do
    record "$run" rate "$rf" "$(lg "$rf" "rate-$run" --rate "$rate")"
  done
done
target/release/loadgen compare "$runs/rate-$RUNS-rf1" "$runs/rate-$RUNS-rf3" \
  --plot tuning/results/replication.svg > /dev/null
"$py" - "$results" "$rate" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rate = sys.argv[2]
med = lambda phase, rf, k: statistics.median(r[k] for r in rows if r["phase"] == phase and r["rf"] == rf)
print("| figure (median of runs) | RF 1 | RF 3 | RF 3 / RF 1 |")
print("|---|---|---|---|")
a, b = med("max", 1, "msgs_per_s"), med("max", 3, "msgs_per_s")
print(f"| acks=all msgs/s, open throttle | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")
for k, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
    a, b = med("rate", 1, k), med("rate", 3, k)
    print(f"| {name} ms at {int(rate):,} msgs/s | {a:.2f} | {b:.2f} | {b / a:.2f} |")
PY
