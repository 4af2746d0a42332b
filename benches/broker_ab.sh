#!/usr/bin/env bash
# Two broker builds back to back under the same load, to tell whether a change moved
# durable produce throughput or its cost: loadgen (acks=all, 1 KiB messages in 256 KiB
# batches, 4 partitions, one producer on core 0) against build A and build B, RUNS times
# (which goes first alternates), each with --flush-mode fsync and write-only. One shard on
# core 1, a fresh data directory per run.
#
# Two measures:
# - throughput (the default): an open throttle, the broker's core the limit, as in
#   tuning/compare.sh's "max". Prints each run and the B / A ratio of the medians. On
#   this 2-core machine the client's core and the disk bound it too, so pairs scatter
#   by 10-20%.
# - cost (RATE=msgs/s): the same fixed rate offered to both builds; prints the CPU
#   seconds the broker's shard thread (and the whole process, io_uring workers included)
#   spends per million messages over the measured window, read from /proc. At a rate
#   both builds sustain this moves by a few percent between runs, not by tens, so it
#   tells a real change in the cost of a message from noise.
#
#   git worktree add ../before <commit> && (cd ../before && cargo build --release --bin weir)
#   WEIR_A=../before/target/release/weir bash benches/broker_ab.sh
#   RUNS=5 DURATION=20 WEIR_A=... WEIR_B=... bash benches/broker_ab.sh
#   # the cost of a message at 250,000 msgs/s, 8 partitions, durable, same flush settings:
#   RATE=250000 PARTITIONS=8 MODES=fsync RUNS=6 \
#     WEIR_FLAGS="--spin-before-park 0 --flush-interval 1ms" WEIR_A=... bash benches/broker_ab.sh
#   # the issue 36 workload: one core at its maximum, 8 partitions, durable only
#   PARTITIONS=8 MODES=fsync DURATION=15 WEIR_FLAGS="--config tuning/max-throughput.toml" \
#     WEIR_A=... bash benches/broker_ab.sh
#   # the same build as a one-host cluster (controller running) against itself alone:
#   WEIR_A=target/release/weir WEIR_B_FLAGS="--node-id 1 --controller-quorum-voters 1@127.0.0.1:29391" \
#     bash benches/broker_ab.sh
#
# Builds differ in defaults (spin-before-park, adaptive flush): name the settings that
# matter in WEIR_FLAGS when comparing across them. Run on an idle machine (a compile
# beside it moves these figures by more than any change does).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
PORT=${PORT:-29292}
WEIR_A=${WEIR_A:?set WEIR_A to the build to compare against}
WEIR_B=${WEIR_B:-target/release/weir}
# Extra serve flags for build B only (word-split on purpose).
WEIR_B_FLAGS=${WEIR_B_FLAGS:-}
# Extra serve flags for both builds (word-split on purpose); --flush-mode comes after them.
WEIR_FLAGS=${WEIR_FLAGS:-}
PARTITIONS=${PARTITIONS:-4}
MODES=${MODES:-fsync write-only}
# Empty: open throttle (throughput); a number: that fixed rate (cost per message).
RATE=${RATE:-}
WARMUP=3
source benches/broker.sh
cargo build --release --quiet -p loadgen
results=target/bench-data/broker-ab.jsonl
: > "$results"

# CPU ticks (1/100 s) the broker process $1 has used: its shard threads, and all threads.
cpu_ticks() {
  local shard=0 all=0 t
  for t in /proc/"$1"/task/*; do
    read -r -a stat < "$t/stat" || continue
    # utime and stime are fields 14 and 15; a thread name holds no space here.
    all=$((all + stat[13] + stat[14]))
    case $(cat "$t/comm") in weir-shard-*) shard=$((shard + stat[13] + stat[14])) ;; esac
  done
  echo "$shard $all"
}

for run in $(seq 1 "$RUNS"); do
  for mode in $MODES; do
    # Which build goes first alternates, so neither always runs on a warmer machine.
    order="A B"
    if [ $((run % 2)) -eq 0 ]; then order="B A"; fi
    for build in $order; do
      # Each build has its own port: builds before 1b7876b bound without SO_REUSEADDR,
      # and their connections' TIME_WAIT keeps the port from a later build for a minute.
      if [ "$build" = A ]; then weir=$WEIR_A; flags=""; port=$PORT; else weir=$WEIR_B; flags=$WEIR_B_FLAGS; port=$((PORT + 1)); fi
      # shellcheck disable=SC2086
      start_broker "$port" $WEIR_FLAGS --flush-mode "$mode" $flags
      out=$(mktemp -d -p target/bench-data)
      throttle=()
      if [ -n "$RATE" ]; then throttle=(--rate "$RATE"); fi
      target/release/loadgen produce --bootstrap 127.0.0.1:"$port" --topic ab \
        --partitions "$PARTITIONS" --message-size 1024 --batch-bytes 262144 --duration "${DURATION}s" \
        --warmup "${WARMUP}s" --cores 0 "${throttle[@]}" --label "$build-$mode-$run" --out "$out" > "$out.log" 2>&1 &
      loadgen=$!
      # The CPU window is the measured one: after the warm-up (and a second for the
      # topic and connections), until a second before the end.
      sleep $((WARMUP + 1))
      read -r shard0 all0 < <(cpu_ticks "$broker_pid")
      sleep $((DURATION - 2))
      read -r shard1 all1 < <(cpu_ticks "$broker_pid")
      wait "$loadgen"
      stop_broker
      rate=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['produce']['messages_per_second'])" "$out/summary.json")
      rm -rf "$out" "$out.log"
      window=$((DURATION - 2))
      echo "{\"run\": $run, \"mode\": \"$mode\", \"build\": \"$build\", \"msgs_per_s\": $rate, \"window_s\": $window, \"shard_ticks\": $((shard1 - shard0)), \"all_ticks\": $((all1 - all0))}" >> "$results"
      echo "run $run $mode $build: $rate msgs/s, shard CPU $((shard1 - shard0))/100 s, process $((all1 - all0))/100 s in ${window} s" >&2
    done
  done
done
python3 - "$results" "$RATE" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cost = bool(sys.argv[2])
def shard(r): return r["shard_ticks"] / 100 / (r["msgs_per_s"] * r["window_s"] / 1e6)
def process(r): return r["all_ticks"] / 100 / (r["msgs_per_s"] * r["window_s"] / 1e6)
def rate(r): return r["msgs_per_s"]
measures = [("shard CPU s per M msgs", shard), ("process CPU s per M msgs", process)] if cost else [("msgs/s", rate)]
print("| mode | measure | A (median) | B (median) | B / A | B / A per run |")
print("|---|---|---|---|---|---|")
for mode in dict.fromkeys(r["mode"] for r in rows):
    for name, f in measures:
        v = {(r["run"], r["build"]): f(r) for r in rows if r["mode"] == mode}
        runs = sorted({run for run, _ in v})
        a = statistics.median(v[run, "A"] for run in runs)
        b = statistics.median(v[run, "B"] for run in runs)
        pairs = ", ".join(f"{v[run, 'B'] / v[run, 'A']:.3f}" for run in runs)
        print(f"| {mode} | {name} | {a:,.3f} | {b:,.3f} | {b / a:.3f} | {pairs} |")
PY
