#!/usr/bin/env bash
# OffsetCommit throughput (one group, 16 partitions per request, THREADS clients) and
# its p50/p99 latency next to the produce acks=all latency measured in the same run —
# both wait for a group commit, so they should be close. RUNS runs of SECONDS each.
#
#   bash benches/group_commit.sh              # RUNS=3 SECONDS=10 THREADS=1
#
# The broker runs one shard on core 1; the clients run on core 0. Run on an idle
# machine after `bash tests/run-all.sh` has installed the Python clients.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
SECONDS_PER_RUN=${SECONDS:-10}
THREADS=${THREADS:-1}
PORT=${PORT:-29192}
source benches/broker.sh
results=target/bench-data/group-commit.jsonl
: > "$results"
for run in $(seq 1 "$RUNS"); do
  start_broker "$PORT"
  line=$(taskset -c 0 "$py" benches/clients/commit_latency.py 127.0.0.1:$PORT "$SECONDS_PER_RUN" "$THREADS")
  stop_broker
  echo "$line" >> "$results"
  echo "run $run: $line" >&2
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
m = lambda k: statistics.median(r[k] for r in rows)
print("| commits/s (16 partitions each) | partition offsets/s | commit p50 ms | commit p99 ms | produce p50 ms | produce p99 ms |")
print("|---|---|---|---|---|---|")
print(f"| {m('commits_per_s'):,.0f} | {m('partition_offsets_per_s'):,.0f} | {m('commit_p50_ms'):.2f} | {m('commit_p99_ms'):.2f} | {m('produce_p50_ms'):.2f} | {m('produce_p99_ms'):.2f} |")
PY
