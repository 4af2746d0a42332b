#!/usr/bin/env bash
# Log compaction: its throughput on one shard and its effect on produce latency, same
# run. One shard on core 1 (segments of 64 MiB), loadgen on core 0.
#  1. The maximum produce rate (acks=all, 1 KiB messages, 64 KiB batches, open throttle).
#  2. RUNS times: fill topic ck-N (cleanup.policy=delete, so nothing compacts yet) with
#     FILL_MB of 1 KiB messages over KEYS keys; produce to another topic at half the
#     maximum for DURATION s and note p99 (baseline); switch ck-N to cleanup.policy=compact
#     and produce at half the maximum again while the pass runs (paced at the default
#     --compaction-rate, 32 MiB/s) — p99 during compaction.
#  3. The same fill, compacted with --compaction-rate 0 (unpaced) on an otherwise idle
#     broker: the raw compaction throughput (MB/s of input segments).
# Prints one line per run and a table of medians; writes target/bench-data/compaction.jsonl
# and plots the last run's two windows in tuning/results/compaction.svg.
#
#   bash benches/compaction.sh
#   RUNS=5 FILL_MB=1000 bash benches/compaction.sh
#
# Run on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-20}
FILL_MB=${FILL_MB:-600}
KEYS=${KEYS:-100000}
RATE=${RATE:-}  # --compaction-rate for the paced runs; empty: the broker's default
PORT=${PORT:-29792}
source benches/broker.sh
cargo build --release --quiet -p loadgen
results=target/bench-data/compaction.jsonl
: > "$results"
log=$(mktemp -p target/bench-data)

serve() {  # serve [extra flags]: one shard with its log in $log
  broker_data=$(mktemp -d -p target/bench-data)
  target/release/weir serve --listen 127.0.0.1:"$PORT" --shards 1 --cores 1 \
    --data-dir "$broker_data" --segment-bytes 67108864 \
    --metrics-listen off --log-level info "$@" > "$log" 2>&1 &
  broker_pid=$!
  wait_for_broker 127.0.0.1 "$PORT"
}
lg() {  # lg TOPIC [extra loadgen flags...]: prints summary.json; KEEP=DIR keeps the run there
  local topic=$1 out
  shift
  out=${KEEP:-$(mktemp -d -p target/bench-data)}
  rm -rf "$out"
  target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" --topic "$topic" \
    --message-size 1024 --batch-bytes 65536 --cores 0 --out "$out" "$@" > "$out.log" 2>&1 \
    || { cat "$out.log" >&2; exit 1; }
  cat "$out/summary.json"
  rm -f "$out.log"
  [ -n "${KEEP:-}" ] || rm -rf "$out"
}
weir_topics() { target/release/weir topics --bootstrap 127.0.0.1:"$PORT" "$@" > /dev/null; }
fill() {  # fill TOPIC: FILL_MB over KEYS keys, not compacted yet
  weir_topics create "$1" --config cleanup.policy=delete
  lg "$1" --keys "$KEYS" --messages $((FILL_MB * 1024)) > /dev/null
}
compacted_lines() { grep -c '"compacted"\|compacted ' "$log" || true; }
wait_compacted() {  # wait_compacted N: until N passes logged "compacted" (at most 300 s)
  for _ in $(seq 1 3000); do
    [ "$(compacted_lines)" -ge "$1" ] && return
    sleep 0.1
  done
  echo "compaction did not finish" >&2
  exit 1
}

serve ${RATE:+--compaction-rate "$RATE"}
max=$(lg plain-max --duration 10s --warmup 2s | "$py" -c "import json,sys; print(json.load(sys.stdin)['produce']['messages_per_second'])")
half=$("$py" -c "print(int($max / 2))")
weir_topics delete plain-max
echo "maximum ${max%.*} msgs/s; half load $half msgs/s" >&2
for run in $(seq 1 "$RUNS"); do
  fill "ck-$run"
  before=$(compacted_lines)
  base=$(KEEP=target/bench-data/no-compaction lg "plain-$run" --rate "$half" \
    --duration "${DURATION}s" --warmup 2s --label "no compaction")
  weir_topics alter-config "ck-$run" cleanup.policy=compact
  during=$(KEEP=target/bench-data/compacting lg "plain-$run" --rate "$half" \
    --duration "${DURATION}s" --warmup 1s --label "compacting")
  wait_compacted $((before + 1))
  weir_topics delete "plain-$run"
  "$py" - "$run" "$results" "$base" "$during" "$log" <<'PY'
import json, re, sys
run, results, base, during, log = sys.argv[1:6]
b, d = json.loads(base), json.loads(during)
line = [l for l in open(log) if "compacted" in l][-1]
fields = dict(re.findall(r'(\w+)=("?[\w.]+"?)', line))
row = {"run": int(run), "p99_base_ms": b["latency_ms"]["produce"]["p99"],
       "p99_compacting_ms": d["latency_ms"]["produce"]["p99"],
       "p50_base_ms": b["latency_ms"]["produce"]["p50"],
       "p50_compacting_ms": d["latency_ms"]["produce"]["p50"],
       "paced_read_mb_per_s": float(fields["read_mb_per_s"].strip('"')),
       "bytes_before": int(fields["bytes_before"]), "bytes_after": int(fields["bytes_after"])}
open(results, "a").write(json.dumps(row) + "\n")
print(f"run {run}: p99 {row['p99_base_ms']:.2f} ms before, {row['p99_compacting_ms']:.2f} ms while "
      f"compacting {row['bytes_before'] / 1e6:.0f} MB -> {row['bytes_after'] / 1e6:.0f} MB "
      f"at {row['paced_read_mb_per_s']} MB/s read (paced)", file=sys.stderr)
PY
done
kill -TERM "$broker_pid"; wait "$broker_pid" || true; rm -rf "$broker_data"
# The last run's two windows, side by side.
target/release/loadgen compare target/bench-data/no-compaction target/bench-data/compacting \
  --metric produce --plot tuning/results/compaction.svg --markdown >&2
rm -rf target/bench-data/no-compaction target/bench-data/compacting

serve --compaction-rate 0
for run in $(seq 1 "$RUNS"); do
  fill "raw-$run"
  before=$(compacted_lines)
  weir_topics alter-config "raw-$run" cleanup.policy=compact
  wait_compacted $((before + 1))
  line=$(grep compacted "$log" | tail -1)
  echo "{\"raw_run\": $run, \"unpaced_read_mb_per_s\": $(echo "$line" | sed -E 's/.*read_mb_per_s="?([0-9.]+).*/\1/')}" >> "$results"
  echo "unpaced run $run: $(echo "$line" | sed -E 's/.*(read_mb_per_s="?[0-9.]+).*/\1/') MB/s read" >&2
done
kill -TERM "$broker_pid"; wait "$broker_pid" || true; rm -rf "$broker_data" "$log"

"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
m = lambda k: statistics.median(r[k] for r in rows if k in r)
print("| figure | median |")
print("|---|---|")
print(f"| produce p99 at 50% load, no compaction | {m('p99_base_ms'):.2f} ms |")
print(f"| produce p99 at 50% load, compacting (paced) | {m('p99_compacting_ms'):.2f} ms ({m('p99_compacting_ms') / m('p99_base_ms'):.2f}x) |")
print(f"| produce p50, no compaction / compacting | {m('p50_base_ms'):.2f} / {m('p50_compacting_ms'):.2f} ms |")
print(f"| compaction read rate, paced | {m('paced_read_mb_per_s'):.1f} MB/s |")
print(f"| compaction read rate, unpaced (--compaction-rate 0) | {m('unpaced_read_mb_per_s'):.1f} MB/s |")
PY
