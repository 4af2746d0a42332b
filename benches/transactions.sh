#!/usr/bin/env bash
# Transactions measured (issue 33's figures), weir durable beside Kafka 4.4 default, one
# broker at a time on core 1, loadgen on core 0, alternating within each of RUNS rounds
# with a fresh broker and data directory each time (benches/peers/lib.sh):
#   idem    idempotent produce, 8 partitions, 1 KiB, acks=all, open throttle, PRODUCERS
#           producer clients: msgs/s;
#   txn     the same in transactions of TXN_SIZE messages: msgs/s, and the EndTxn
#           (commit) latency beside the produce latency of the same run;
#   read    TXN_MESSAGES written in transactions with 10% aborted, then read from the
#           start at READ_COMMITTED (the 90% committed) and at READ_UNCOMMITTED (all):
#           MB/s fetched.
#
#   bash benches/transactions.sh                     # RUNS=2 DURATION=20s
#   RUNS=1 DURATION=5s bash benches/transactions.sh  # a quick try
#
# loadgen speaks transactions V2 wherever the broker finalizes transaction.version 2 (as
# Kafka's 4.x producer does); TXN_FLAGS=--transactions-v1 measures V1 instead.
#
# Writes target/bench-data/transactions/ and prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-2}
DURATION=${DURATION:-20s}
TXN_SIZE=${TXN_SIZE:-1000}
TXN_MESSAGES=${TXN_MESSAGES:-1000000}
# Producer clients, each with its own connections (and, transactional, its own id).
PRODUCERS=${PRODUCERS:-4}
read -r -a txn_flags <<< "${TXN_FLAGS:-}"
PORT=${PORT:-29292}
SYSTEMS=${SYSTEMS:-"weir-durable kafka-default"}
source benches/broker.sh
cargo build --release --quiet -p weir -p loadgen
bash benches/peers/kafka.sh classpath > /dev/null
out=target/bench-data/transactions
rows="$out/rows.jsonl"
rm -rf "$out"
mkdir -p "$out"
read -r -a systems <<< "$SYSTEMS"
source benches/peers/lib.sh

# ready TOPIC: creates TOPIC (8 partitions) and waits until a message to each partition
# is acknowledged: a new Kafka topic's leaders take a moment, and a numbered batch that
# failed would leave loadgen's sequence with a gap it does not retry.
ready() {
  for _ in $(seq 1 100); do
    rm -rf "$out/probe"
    if target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" --topic "$1" --partitions 8 \
      --messages 8 --acks all --cores 0 --out "$out/probe" > /dev/null 2>&1 &&
      [ "$(jq .errors "$out/probe/summary.json")" = 0 ]; then
      return
    fi
    sleep 0.2
  done
  echo "topic $1 never became writable" >&2
  exit 1
}

for run in $(seq 1 "$RUNS"); do
  order=("${systems[@]}")
  if [ $((run % 2)) -eq 0 ]; then
    order=()
    for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[$i]}"); done
  fi
  for system in "${order[@]}"; do
    dir=$(mktemp -d -p target/bench-data)
    start "$system" "$dir"
    for topic in idem txn aborts; do ready "$topic"; done
    # Odd runs measure idempotent then transactional, even runs the other way round,
    # so neither ratio side always meets the broker's fresher or fuller disk.
    workloads=(idem txn)
    [ $((run % 2)) -eq 0 ] && workloads=(txn idem)
    for workload in "${workloads[@]}"; do
      if [ "$workload" = idem ]; then
        s=$(lg produce "$system-idem-r$run" --topic idem --partitions 8 --idempotent \
          --producers "$PRODUCERS" --duration "$DURATION")
        row "$(jq -c --argjson run "$run" --arg system "$system" \
          '{run:$run, system:$system, workload:"idem", msgs_per_s:.produce.messages_per_second,
            produce_p99_ms:.latency_ms.produce.p99}' <<< "$s")"
      else
        s=$(lg produce "$system-txn-r$run" --topic txn --partitions 8 --transactional \
          --transaction-size "$TXN_SIZE" --producers "$PRODUCERS" --duration "$DURATION" \
          "${txn_flags[@]}")
        row "$(jq -c --argjson run "$run" --arg system "$system" \
          '{run:$run, system:$system, workload:"txn", msgs_per_s:.produce.messages_per_second,
            produce_p50_ms:.latency_ms.produce.p50, produce_p99_ms:.latency_ms.produce.p99,
            commit_p50_ms:.latency_ms.commit.p50, commit_p99_ms:.latency_ms.commit.p99,
            begin_p50_ms:.latency_ms.begin.p50}' <<< "$s")"
      fi
    done
    lg produce "$system-fill-r$run" --topic aborts --partitions 8 --transactional \
      --transaction-size "$TXN_SIZE" --abort-ratio 0.1 --messages "$TXN_MESSAGES" \
      "${txn_flags[@]}" > /dev/null
    # The two reads alternate their order by round too, so neither always reads second.
    isolations=(committed uncommitted)
    [ $((run % 2)) -eq 0 ] && isolations=(uncommitted committed)
    for isolation in "${isolations[@]}"; do
      # Every record the isolation level delivers: 90% of them at READ_COMMITTED.
      flag=(--messages "$TXN_MESSAGES")
      [ "$isolation" = committed ] && flag=(--read-committed --messages $((TXN_MESSAGES * 9 / 10)))
      s=$(lg consume "$system-read-$isolation-r$run" --topic aborts --from earliest \
        --fetch-bytes 52428800 "${flag[@]}")
      row "$(jq -c --argjson run "$run" --arg system "$system" --arg w "read-$isolation" \
        '{run:$run, system:$system, workload:$w, mb_per_s:.consume.megabytes_per_second,
          msgs:.consume.messages}' <<< "$s")"
    done
    stop
    rm -rf "$dir" "$dir.log"
  done
done

python3 - "$rows" "${systems[@]}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
systems = sys.argv[2:]
def vals(system, workload, key):
    return [r[key] for r in sorted(rows, key=lambda r: r["run"])
            if r["system"] == system and r["workload"] == workload and r.get(key) is not None]
def cell(v, fmt):
    return f"{fmt(statistics.median(v))} ({', '.join(fmt(x) for x in v)})" if v else "–"
def ratios(a, b):
    return cell([x / y for x, y in zip(a, b) if y], lambda v: f"{v:.2f}")
print("| figure | " + " | ".join(systems) + " |")
print("|---|" + "---|" * len(systems))
msgs = lambda v: f"{v:,.0f}"
ms = lambda v: f"{v:.1f}"
mb = lambda v: f"{v:,.0f}"
lines = [
    ("idempotent produce, msgs/s", lambda s: cell(vals(s, "idem", "msgs_per_s"), msgs)),
    (f"transactional produce, msgs/s", lambda s: cell(vals(s, "txn", "msgs_per_s"), msgs)),
    ("transactional ÷ idempotent", lambda s: ratios(vals(s, "txn", "msgs_per_s"), vals(s, "idem", "msgs_per_s"))),
    ("AddPartitionsToTxn p50, ms", lambda s: cell(vals(s, "txn", "begin_p50_ms"), ms)),
    ("produce p50 (same run), ms", lambda s: cell(vals(s, "txn", "produce_p50_ms"), ms)),
    ("EndTxn p50, ms", lambda s: cell(vals(s, "txn", "commit_p50_ms"), ms)),
    ("EndTxn p99, ms", lambda s: cell(vals(s, "txn", "commit_p99_ms"), ms)),
    ("produce p99 (same run), ms", lambda s: cell(vals(s, "txn", "produce_p99_ms"), ms)),
    ("EndTxn p99 ÷ produce p99", lambda s: ratios(vals(s, "txn", "commit_p99_ms"), vals(s, "txn", "produce_p99_ms"))),
    ("read_committed, MB/s (10% aborted)", lambda s: cell(vals(s, "read-committed", "mb_per_s"), mb)),
    ("read_uncommitted, MB/s", lambda s: cell(vals(s, "read-uncommitted", "mb_per_s"), mb)),
    ("read_committed ÷ read_uncommitted", lambda s: ratios(vals(s, "read-committed", "mb_per_s"), vals(s, "read-uncommitted", "mb_per_s"))),
]
for label, f in lines:
    print(f"| {label} | " + " | ".join(f(s) for s in systems) + " |")
PY
