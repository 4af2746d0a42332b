#!/usr/bin/env bash
# What a clean restart costs the device: a broker (one shard on core 1, 4 partitions,
# 256 MiB segments, 1 GiB retention per partition, so segment files recycle) runs at
# full speed for 40 s, stops cleanly (SIGTERM), starts again on the same data, and takes
# 10 s at a fixed 200,000 msgs/s. Reports, for those 10 s, the zeros the broker wrote
# (`weir_storage_written_bytes_total{kind="zeros"}`) and the device's written bytes per
# produced byte (`/proc/diskstats`), and the trims the stop and start caused. The first
# argument is the broker binary to measure (default target/release/weir), so two builds
# can be compared on the same machine.
# Usage: bash benches/clean_restart.sh [WEIR_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."

weir=${1:-target/release/weir}
source benches/broker.sh
cargo build --release --quiet -p loadgen
lg=target/release/loadgen
out=$(mktemp -d -p target/bench-data)
data=$out/data
metrics=127.0.0.1:29644
trap 'kill -TERM "${pid:-0}" 2> /dev/null || true; wait || true; rm -rf "$out"' EXIT

device=$(basename "$(df --output=source "$out" | tail -1)")
# diskstats: bytes written, bytes discarded.
device_bytes() {
  awk -v d="$device" '$3 == d { printf "%.0f %.0f\n", $10 * 512, $18 * 512 }' /proc/diskstats
}
zeros() {
  curl -s "$metrics/metrics" | awk '/^weir_storage_written_bytes_total.*kind="zeros"/ { printf "%.0f\n", $2 }'
}
serve() {
  "$weir" serve --listen 127.0.0.1:29092 --shards 1 --cores 1 --data-dir "$data" \
    --log-level warn --segment-bytes 268435456 --retention-bytes 1073741824 \
    --metrics-listen "$metrics" &
  pid=$!
  wait_for_broker 127.0.0.1 29092
}
produce() {
  "$lg" produce --bootstrap 127.0.0.1:29092 --cores 0 --message-size 1024 --acks all \
    --warmup 0s --topic restart --partitions 4 --batch-bytes 262144 --out "$out/$1" "${@:2}" \
    > /dev/null 2> "$out/$1.log" || { cat "$out/$1.log" >&2; exit 1; }
}

serve
produce fill --duration 40s
sleep 12 # retention runs every 10 s: files go to the pool
read -r _ trimmed0 < <(device_bytes)
kill -TERM "$pid"
wait "$pid"
sleep 6 # ext4 issues discards at its next journal commit
serve
sleep 2
read -r written1 trimmed1 < <(device_bytes)
zeros1=$(zeros)
produce after --duration 10s --rate 200000
read -r written2 _ < <(device_bytes)
zeros2=$(zeros)
produced=$(jq '.produce.messages * 1024' "$out/after/summary.json")
jq -n --arg weir "$weir" --argjson trimmed $((trimmed1 - trimmed0)) \
  --argjson zeros $((zeros2 - zeros1)) --argjson written $((written2 - written1)) \
  --argjson produced "$produced" --slurpfile s "$out/after/summary.json" '{
    broker: $weir,
    trimmed_bytes_by_stop_and_start: $trimmed,
    after_restart: {
      zeros_bytes: $zeros,
      device_bytes_per_produced_byte: ($written / $produced),
      produce_p50_ms: $s[0].latency_ms.produce.p50,
      produce_p99_ms: $s[0].latency_ms.produce.p99
    }
  }'
