#!/usr/bin/env bash
# Broker throughput through a real client: confluent-kafka (librdkafka) produces 1 KiB
# messages with acks=all and linger.ms=5 to one shard, then consumes them back; once
# with fsync (the default) and once write-only, alternating RUNS times, so the ratio
# fsync / write-only comes from the same run. Prints a Markdown table.
#
#   bash benches/broker_produce.sh            # RUNS=3, COUNT=300000
#   RUNS=5 COUNT=500000 bash benches/broker_produce.sh
#
# The broker's shard is pinned to core 1 and the client to core 0. Run on an idle
# machine, after `bash tests/run-all.sh` has installed the Python clients.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
COUNT=${COUNT:-300000}
PORT=${PORT:-29092}
source benches/broker.sh
results=target/bench-data/broker-produce.jsonl
: > "$results"
for run in $(seq 1 "$RUNS"); do
  for mode in fsync write-only; do
    start_broker "$PORT" --flush-mode "$mode"
    line=$(taskset -c 0 "$py" benches/clients/produce_consume.py 127.0.0.1:$PORT bench "$COUNT" 1024)
    stop_broker
    echo "{\"run\": $run, \"mode\": \"$mode\", \"result\": $line}" >> "$results"
    echo "run $run $mode: $line" >&2
  done
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(mode, key):
    return statistics.median(r["result"][key] for r in rows if r["mode"] == mode)
print("| mode | produce msgs/s | produce MB/s | consume msgs/s | consume MB/s |")
print("|---|---|---|---|---|")
for mode in ("fsync", "write-only"):
    print(f"| {mode} | {med(mode,'produce_msgs_per_s'):,.0f} | {med(mode,'produce_mb_per_s'):.0f} | "
          f"{med(mode,'consume_msgs_per_s'):,.0f} | {med(mode,'consume_mb_per_s'):.0f} |")
ratios = [a["result"]["produce_msgs_per_s"] / b["result"]["produce_msgs_per_s"]
          for a, b in zip([r for r in rows if r["mode"] == "fsync"], [r for r in rows if r["mode"] == "write-only"])]
cons = [r["result"]["consume_msgs_per_s"] / r["result"]["produce_msgs_per_s"] for r in rows if r["mode"] == "fsync"]
print(f"\nfsync / write-only produce throughput, per run: {', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f}")
print(f"consume / produce throughput (fsync), per run: {', '.join(f'{x:.2f}' for x in cons)}; median {statistics.median(cons):.2f}")
PY
