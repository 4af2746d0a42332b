#!/usr/bin/env bash
# Issue 33's EndTxn figure on the replicated cluster: three release hosts on 127.0.0.1-3
# (benches/broker.sh start_cluster: one shard each, durable), a topic of 8 partitions at
# replication factor 3 and min.insync.replicas 2, loadgen on core 0 with PRODUCERS
# transactional producers (acks=all, 1 KiB messages, TXN_SIZE messages a transaction),
# then the same with idempotent producers, RUNS times alternating which goes first. The
# transaction state is journaled on the replicated __consumer_offsets before each
# answer, so a commit pays a replicated PrepareCommit and replicated markers.
#
#   bash benches/transactions_rf3.sh                    # RUNS=2 DURATION=10
#
# Prints a Markdown table: EndTxn p50/p99 beside the produce p99 of the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-2}
DURATION=${DURATION:-10}
TXN_SIZE=${TXN_SIZE:-1000}
PRODUCERS=${PRODUCERS:-4}
PORT=${PORT:-29892}
CPORT=${CPORT:-29891}
source benches/broker.sh
cargo build --release --quiet -p loadgen
start_cluster "$PORT" "$CPORT"
sleep 2
rows=$dir/rows.jsonl
: > "$rows"
lg() {  # lg RUN KIND [loadgen flags...]: one run on a fresh RF 3 topic
  local run=$1 kind=$2 topic="$2-r$1"
  shift 2
  target/release/weir topics --bootstrap 127.0.0.1:"$PORT" create "$topic" --partitions 8 \
    --replication-factor 3 --config min.insync.replicas=2 > /dev/null
  sleep 1
  target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" --topic "$topic" \
    --message-size 1024 --batch-bytes 65536 --linger 5ms --max-in-flight 5 --acks all \
    --producers "$PRODUCERS" --cores 0 --label "$kind RF 3" --out "$dir/$topic" \
    --duration "${DURATION}s" --warmup 2s "$@" > "$dir/$topic.log" 2>&1 ||
    { cat "$dir/$topic.log" >&2; exit 1; }
  jq -c --argjson run "$run" --arg kind "$kind" \
    '{run:$run, kind:$kind, msgs_per_s:.produce.messages_per_second,
      produce_p99_ms:.latency_ms.produce.p99, commit_p50_ms:.latency_ms.commit.p50,
      commit_p99_ms:.latency_ms.commit.p99}' "$dir/$topic/summary.json" | tee -a "$rows" >&2
  target/release/weir topics --bootstrap 127.0.0.1:"$PORT" delete "$topic" > /dev/null
}
for run in $(seq 1 "$RUNS"); do
  kinds=(txn idem)
  [ $((run % 2)) -eq 0 ] && kinds=(idem txn)
  for kind in "${kinds[@]}"; do
    case $kind in
      txn) lg "$run" txn --transactional --transaction-size "$TXN_SIZE" ;;
      idem) lg "$run" idem --idempotent ;;
    esac
  done
done

python3 - "$rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def vals(kind, key):
    return [r[key] for r in sorted(rows, key=lambda r: r["run"])
            if r["kind"] == kind and r.get(key) is not None]
def cell(v, fmt):
    return f"{fmt(statistics.median(v))} ({', '.join(fmt(x) for x in v)})" if v else "–"
msgs = lambda v: f"{v:,.0f}"
ms = lambda v: f"{v:.1f}"
ratio = lambda v: f"{v:.2f}"
txn, idem = vals("txn", "msgs_per_s"), vals("idem", "msgs_per_s")
print("| figure, RF 3 | weir cluster |")
print("|---|---|")
print(f"| idempotent produce, msgs/s | {cell(idem, msgs)} |")
print(f"| transactional produce, msgs/s | {cell(txn, msgs)} |")
print(f"| transactional ÷ idempotent | {cell([a / b for a, b in zip(txn, idem)], ratio)} |")
print(f"| EndTxn p50, ms | {cell(vals('txn', 'commit_p50_ms'), ms)} |")
print(f"| EndTxn p99, ms | {cell(vals('txn', 'commit_p99_ms'), ms)} |")
print(f"| produce p99 (same run), ms | {cell(vals('txn', 'produce_p99_ms'), ms)} |")
e, p = vals("txn", "commit_p99_ms"), vals("txn", "produce_p99_ms")
print(f"| EndTxn p99 ÷ produce p99 | {cell([a / b for a, b in zip(e, p)], ratio)} |")
PY
