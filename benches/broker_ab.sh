#!/usr/bin/env bash
# Two broker builds back to back under the same load, to tell whether a change moved
# durable produce throughput: loadgen (open throttle, acks=all, 1 KiB messages in 256 KiB
# batches, 4 partitions, one producer on core 0: the broker's core is the limit, as in
# tuning/compare.sh's "max") against build A and build B, RUNS times (which goes first
# alternates), each with --flush-mode fsync and write-only. One shard on core 1, a fresh
# data directory per run. Prints each run and the B / A ratio of the medians per mode.
#
#   git worktree add ../before <commit> && (cd ../before && cargo build --release --bin weir)
#   WEIR_A=../before/target/release/weir bash benches/broker_ab.sh
#   RUNS=5 DURATION=20 WEIR_A=... WEIR_B=... bash benches/broker_ab.sh
#   # the same build as a one-host cluster (controller running) against itself alone:
#   WEIR_A=target/release/weir WEIR_B_FLAGS="--node-id 1 --controller-quorum-voters 1@127.0.0.1:29391" \
#     bash benches/broker_ab.sh
#
# Run on an idle machine (a compile beside it moves these figures by more than any
# change does).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
PORT=${PORT:-29292}
WEIR_A=${WEIR_A:?set WEIR_A to the build to compare against}
WEIR_B=${WEIR_B:-target/release/weir}
# Extra serve flags for build B only (word-split on purpose).
WEIR_B_FLAGS=${WEIR_B_FLAGS:-}
source benches/broker.sh
cargo build --release --quiet -p loadgen
results=target/bench-data/broker-ab.jsonl
: > "$results"
for run in $(seq 1 "$RUNS"); do
  for mode in fsync write-only; do
    # Which build goes first alternates, so neither always runs on a warmer machine.
    order="A B"
    if [ $((run % 2)) -eq 0 ]; then order="B A"; fi
    for build in $order; do
      # Each build has its own port: builds before 1b7876b bound without SO_REUSEADDR,
      # and their connections' TIME_WAIT keeps the port from a later build for a minute.
      if [ "$build" = A ]; then weir=$WEIR_A; flags=""; port=$PORT; else weir=$WEIR_B; flags=$WEIR_B_FLAGS; port=$((PORT + 1)); fi
      # shellcheck disable=SC2086
      start_broker "$port" --flush-mode "$mode" $flags
      out=$(mktemp -d -p target/bench-data)
      target/release/loadgen produce --bootstrap 127.0.0.1:"$port" --topic ab \
        --partitions 4 --message-size 1024 --batch-bytes 262144 --duration "${DURATION}s" \
        --warmup 3s --cores 0 --label "$build-$mode-$run" --out "$out" > "$out.log" 2>&1
      stop_broker
      rate=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['produce']['messages_per_second'])" "$out/summary.json")
      rm -rf "$out" "$out.log"
      echo "{\"run\": $run, \"mode\": \"$mode\", \"build\": \"$build\", \"msgs_per_s\": $rate}" >> "$results"
      echo "run $run $mode $build: $rate msgs/s" >&2
    done
  done
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| mode | A msgs/s (median) | B msgs/s (median) | B / A |")
print("|---|---|---|---|")
for mode in ("fsync", "write-only"):
    a = statistics.median(r["msgs_per_s"] for r in rows if r["mode"] == mode and r["build"] == "A")
    b = statistics.median(r["msgs_per_s"] for r in rows if r["mode"] == mode and r["build"] == "B")
    print(f"| {mode} | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")
PY
