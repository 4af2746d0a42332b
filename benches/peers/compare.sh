#!/usr/bin/env bash
# weir beside Apache Kafka 4.4.0 on this machine, one host: the same loadgen workloads
# against four brokers — weir durable (its default: every acknowledged batch fsynced),
# weir write-only, Kafka default (acknowledged from the page cache), Kafka durable
# (log.flush.interval.messages=1) — alternating the systems within each of RUNS rounds,
# a fresh broker and data directory each time, all on this project's disk.
#
#   bash benches/peers/compare.sh                 # RUNS=2, DURATION=15s
#   RUNS=3 DURATION=30s bash benches/peers/compare.sh
#   RATE=71607 bash benches/peers/compare.sh      # only (3) again, at this rate, beside
#                                                 # the throughput rows of the last run
#
# Workloads (1 KiB records, acks=all, one producer, 64 KiB batches, linger 5 ms, 5
# requests in flight): (1) one partition, (2) 8 and 100 partitions, at full speed:
# throughput; (3) 8 partitions at a fixed rate of 50% of the slower durable system's
# median maximum in (2): produce and end-to-end latency, coordinated-omission free;
# (8) resident memory idle and during (2). Each broker is pinned to core 1 (Kafka's JVM
# with taskset), loadgen to core 0. Writes target/bench-data/peers/ (rows.jsonl, the
# loadgen runs) and prints Markdown tables; the plots of (3) go beside RESULTS.md.
# Run on an idle machine after `cargo build --release`.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-2}
DURATION=${DURATION:-15s}
PORT=${PORT:-29092}
source benches/broker.sh
cargo build --release --quiet -p loadgen
bash benches/peers/kafka.sh classpath > /dev/null
out=target/bench-data/peers
rows="$out/rows.jsonl"
if [ -z "${RATE:-}" ]; then
  rm -rf "$out"
elif [ -f "$rows" ]; then
  jq -c 'select(.workload != "latency-50")' "$rows" > "$rows.kept"
  mv "$rows.kept" "$rows"
fi
mkdir -p "$out"
systems=(weir-durable kafka-default weir-write-only kafka-durable)

source benches/peers/lib.sh

# Throughput and memory.
for run in $(seq 1 "$RUNS"); do
  [ -z "${RATE:-}" ] || break
  for system in "${systems[@]}"; do
    dir=$(mktemp -d -p target/bench-data)
    start "$system" "$dir"
    sleep 5
    row "{\"run\":$run,\"system\":\"$system\",\"workload\":\"rss-idle\",\"rss_kib\":$(rss_kib "$pid")}"
    for parts in 1 8 100; do
      name="$system-p$parts-r$run"
      # Resident memory sampled once a second during the 8-partition run; its peak kept.
      peak=0
      if [ "$parts" = 8 ]; then
        ( while kill -0 "$pid" 2>/dev/null; do rss_kib "$pid"; sleep 1; done ) > "$out/$name.rss" &
        sampler=$!
      fi
      s=$(lg produce "$name" --warmup 3s --duration "$DURATION" --topic "p$parts" --partitions "$parts")
      if [ "$parts" = 8 ]; then
        kill "$sampler"; wait "$sampler" 2>/dev/null || true
        peak=$(sort -n "$out/$name.rss" | tail -1)
        row "{\"run\":$run,\"system\":\"$system\",\"workload\":\"rss-load\",\"rss_kib\":$peak}"
      fi
      row "$(jq -c --argjson run "$run" --arg system "$system" --arg w "throughput-p$parts" \
        '{run:$run, system:$system, workload:$w, msgs_per_s:.produce.messages_per_second,
          p99_ms:.latency_ms.produce.p99}' <<< "$s")"
    done
    stop
    rm -rf "$dir" "$dir.log"
  done
done

# The fixed rate: half the slower durable system's median 8-partition maximum.
rate=${RATE:-$(jq -s '[.[] | select(.workload == "throughput-p8" and (.system == "weir-durable" or .system == "kafka-default"))]
  | group_by(.system) | map(map(.msgs_per_s) | sort | .[(length - 1) / 2 | floor]) | min / 2 | floor' "$rows")}
echo "fixed rate for latency: $rate msgs/s" >&2
for run in $(seq 1 "$RUNS"); do
  for system in "${systems[@]}"; do
    dir=$(mktemp -d -p target/bench-data)
    start "$system" "$dir"
    name="$system-e2e-r$run"
    s=$(lg e2e "$name" --warmup 3s --duration "$DURATION" --topic e2e --partitions 8 --rate "$rate")
    row "$(jq -c --argjson run "$run" --arg system "$system" --argjson rate "$rate" \
      '{run:$run, system:$system, workload:"latency-50", rate:$rate,
        produce:.latency_ms.produce, e2e:.latency_ms.e2e}' <<< "$s")"
    stop
    rm -rf "$dir" "$dir.log"
  done
done

python3 benches/peers/tables.py "$rows"
runs=()
for system in "${systems[@]}"; do runs+=("$out/$system-e2e-r1"); done
target/release/loadgen compare --markdown --plot benches/peers/latency-50-produce.svg "${runs[@]}"
target/release/loadgen compare --markdown --metric e2e --plot benches/peers/latency-50-e2e.svg "${runs[@]}"
