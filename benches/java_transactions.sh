#!/usr/bin/env bash
# Transactions V2 measured with Kafka's own client: ProducerPerformance (kafka-tools
# 4.4.0, Java client defaults: batch.size 16 KiB, linger.ms 5, 5 requests in flight)
# producing COUNT 1 KiB records with acks=all to an 8-partition topic, idempotent and
# then transactional (a commit every TXN_MS ms: the Java client speaks transactions V2
# to weir, an epoch bump per transaction and partitions enrolled by their leaders), on
# weir durable and on Kafka 4.4 default, one broker at a time on core 1 and the client
# on core 0, alternating the order within each of RUNS rounds with a fresh broker each
# time (benches/peers/lib.sh). Prints each run and a Markdown table of the medians.
#
#   bash benches/java_transactions.sh                # RUNS=2 COUNT=300000 TXN_MS=100
#   RUNS=1 COUNT=100000 bash benches/java_transactions.sh
#
# Run on an idle machine after `bash tests/run-all.sh` (it builds tests/jvm).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-2}
COUNT=${COUNT:-300000}
TXN_MS=${TXN_MS:-100}
PORT=${PORT:-29392}
SYSTEMS=${SYSTEMS:-"weir-durable kafka-default"}
source benches/broker.sh
cargo build --release --quiet -p weir
bash benches/peers/kafka.sh classpath > /dev/null
[ -f target/jvm/classpath.txt ] || { echo "run bash tests/run-all.sh first (it builds tests/jvm)"; exit 1; }
cp="target/jvm/classes:$(cat target/jvm/classpath.txt)"
out=target/bench-data/java-transactions
rows="$out/rows.jsonl"
rm -rf "$out"
mkdir -p "$out"
read -r -a systems <<< "$SYSTEMS"
source benches/peers/lib.sh

# perf MODE: one ProducerPerformance run (idem or txn) to topic MODE; prints its row.
perf() {
  local mode=$1 extra=()
  [ "$mode" = txn ] && extra=(--transactional-id "perf-$RANDOM" --transaction-duration-ms "$TXN_MS")
  # Its last line: N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max
  # latency, p50, p95, p99, p99.9 (ms).
  taskset -c 0 java -Xms1g -Xmx1g -cp "$cp" org.apache.kafka.tools.ProducerPerformance \
    --topic "$mode" --num-records "$COUNT" --record-size 1024 --throughput -1 \
    --bootstrap-server 127.0.0.1:"$PORT" --command-property acks=all \
    --command-property enable.idempotence=true "${extra[@]}" 2> "$out/perf.err" | tail -1
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
    for topic in idem txn; do
      taskset -c 0 java -cp "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server \
        127.0.0.1:"$PORT" --create --topic "$topic" --partitions 8 --replication-factor 1 > /dev/null
    done
    for mode in idem txn; do
      line=$(perf "$mode")
      row "$(python3 - "$line" "$run" "$system" "$mode" <<'PY'
import json, re, sys
line, run, system, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
num = lambda pattern: float(re.search(pattern, line).group(1))
print(json.dumps({"run": run, "system": system, "workload": mode,
                  "msgs_per_s": num(r"([\d.]+) records/sec"), "p99_ms": num(r"([\d.]+) ms 99th")}))
PY
)"
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
            if r["system"] == system and r["workload"] == workload]
def cell(v, fmt):
    return f"{fmt(statistics.median(v))} ({', '.join(fmt(x) for x in v)})" if v else "–"
def ratios(a, b):
    return cell([x / y for x, y in zip(a, b) if y], lambda v: f"{v:.2f}")
msgs = lambda v: f"{v:,.0f}"
ms = lambda v: f"{v:.1f}"
print("| figure (Java client, ProducerPerformance) | " + " | ".join(systems) + " |")
print("|---|" + "---|" * len(systems))
lines = [
    ("idempotent, msgs/s", lambda s: cell(vals(s, "idem", "msgs_per_s"), msgs)),
    ("transactional (V2), msgs/s", lambda s: cell(vals(s, "txn", "msgs_per_s"), msgs)),
    ("transactional ÷ idempotent", lambda s: ratios(vals(s, "txn", "msgs_per_s"), vals(s, "idem", "msgs_per_s"))),
    ("idempotent p99, ms", lambda s: cell(vals(s, "idem", "p99_ms"), ms)),
    ("transactional p99, ms", lambda s: cell(vals(s, "txn", "p99_ms"), ms)),
]
for label, f in lines:
    print(f"| {label} | " + " | ".join(f(s) for s in systems) + " |")
PY
