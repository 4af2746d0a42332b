#!/usr/bin/env bash
# The adaptive group commit under a load that steps up and down: one shard (core 1) with
# the default settings, loadgen on core 0 measures the maximum (8 s open throttle), then
# steps through 10%, 30%, 60%, 90%, 100%, 60%, 30%, 10% of it, 8 s each. Plots the rate,
# the interval the controller chose and the p99 per second to
# tuning/results/step-load.svg. Run it on an idle machine.
# Usage: bash benches/step_load.sh [extra serve flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/broker.sh
cargo build --release --quiet -p loadgen
lg=target/release/loadgen
runs=target/step-load/$(date +%Y%m%d-%H%M%S)
mkdir -p "$runs" tuning/results
start_broker 29092 --metrics-listen 127.0.0.1:29644 "$@"
"$lg" produce --bootstrap 127.0.0.1:29092 --cores 0 --topic steps --partitions 1 \
  --message-size 1024 --acks all --batch-bytes 262144 --warmup 3s --duration 8s \
  --out "$runs/max" > /dev/null 2>&1
max=$(jq -r '.produce.messages_per_second | floor' "$runs/max/summary.json")
echo "maximum: $max msgs/s"
"$py" benches/step_load.py "$lg" 127.0.0.1:29092 http://127.0.0.1:29644/metrics "$max" \
  "$runs" tuning/results/step-load.svg
stop_broker
