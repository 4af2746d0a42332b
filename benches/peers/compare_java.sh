#!/usr/bin/env bash
# weir beside Apache Kafka 4.4.0 with Kafka's own drivers, so the figures do not depend
# on weir's client: ProducerPerformance writes COUNT 1 KiB records (acks=all, the Java
# producer set as loadgen is in compare.sh: batch.size 64 KiB, linger.ms 5, 5 requests in
# flight) to an 8-partition topic, then ConsumerPerformance reads them all back; against
# weir durable, weir write-only, Kafka default and Kafka durable, alternating within each
# of RUNS rounds, a fresh broker and data directory each time.
#
#   bash benches/peers/compare_java.sh                  # RUNS=2, COUNT=1000000
#   RUNS=3 COUNT=2000000 bash benches/peers/compare_java.sh
#
# Each broker is pinned to core 1 (benches/peers/lib.sh), the Java tools to core 0 with
# a 1 GiB heap. Rows go to target/bench-data/peers-java/rows.jsonl; prints Markdown tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-2}
COUNT=${COUNT:-1000000}
PORT=${PORT:-29092}
source benches/broker.sh
out=target/bench-data/peers-java
rows="$out/rows.jsonl"
rm -rf "$out"
mkdir -p "$out"
cp=$(bash benches/peers/kafka.sh classpath)
systems=(weir-durable kafka-default weir-write-only kafka-durable)
source benches/peers/lib.sh

# tool CLASS ARGS...: one of Kafka's tools in a JVM pinned to core 0.
tool() {
  local class=$1
  shift
  taskset -c 0 java -Xms1g -Xmx1g -cp "$cp" -Dlog4j2.level=warn "$class" "$@"
}

for run in $(seq 1 "$RUNS"); do
  for system in "${systems[@]}"; do
    dir=$(mktemp -d -p target/bench-data)
    start "$system" "$dir"
    tool org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:"$PORT" --create \
      --topic perf --partitions 8 --replication-factor 1 > "$out/$system-$run.topic.log" 2>&1
    # Its last line: N records sent, R records/sec (M MB/sec), A ms avg latency,
    # X ms max latency, p50, p95, p99, p99.9 (ms).
    produced=$(tool org.apache.kafka.tools.ProducerPerformance --topic perf --num-records "$COUNT" \
      --record-size 1024 --throughput -1 --bootstrap-server 127.0.0.1:"$PORT" \
      --command-property acks=all --command-property batch.size=65536 --command-property linger.ms=5 \
      2> "$out/$system-$run.producer.err" | tee "$out/$system-$run.producer.log" | tail -1)
    # A header, then: start, end, MB, MB/s, records, records/s, rebalance ms, fetch ms,
    # fetch MB/s, fetch records/s (the last three leave the group join out).
    consumed=$(tool org.apache.kafka.tools.ConsumerPerformance --topic perf --num-records "$COUNT" \
      --bootstrap-server 127.0.0.1:"$PORT" --timeout 60000 \
      2> "$out/$system-$run.consumer.err" | tee "$out/$system-$run.consumer.log" | tail -1)
    stop
    rm -rf "$dir" "$dir.log"
    row "$(python3 - "$run" "$system" "$produced" "$consumed" "$COUNT" <<'PY'
import json, re, sys
run, system, produced, consumed, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
num = lambda pattern: float(re.search(pattern, produced).group(1))
if not produced.startswith(f"{count} records sent"):
    sys.exit(f"{system}: ProducerPerformance did not send {count} records: {produced!r}")
f = [x.strip() for x in consumed.split(",")]
if len(f) < 10 or int(f[4]) != count:
    sys.exit(f"{system}: ConsumerPerformance did not read {count} records: {consumed!r}")
print(json.dumps({"run": int(run), "system": system,
                  "produce_msgs_per_s": num(r"([\d.]+) records/sec"),
                  "produce_p99_ms": num(r"([\d.]+) ms 99th"),
                  "produce_p999_ms": num(r"([\d.]+) ms 99.9th"),
                  "consume_mb_per_s": float(f[8]), "consume_msgs_per_s": float(f[9])}))
PY
)"
  done
done

python3 - "$rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
systems = list(dict.fromkeys(r["system"] for r in rows))
def cell(system, key):
    v = [r[key] for r in rows if r["system"] == system]
    fmt = (lambda x: f"{x:,.0f}") if max(v) >= 100 else (lambda x: f"{x:.3g}")
    return f"{fmt(statistics.median(v))} ({', '.join(fmt(x) for x in v)})"
def ratio(a, b, key):
    va = [r[key] for r in rows if r["system"] == a]
    vb = [r[key] for r in rows if r["system"] == b]
    each = [x / y for x, y in zip(va, vb)]
    return f"{statistics.median(va) / statistics.median(vb):.2f} ({', '.join(f'{x:.2f}' for x in each)})"
print("| measure | " + " | ".join(systems) + " | weir durable ÷ Kafka default | weir durable ÷ Kafka durable |")
print("|---|" + "---|" * (len(systems) + 2))
for key, name in [("produce_msgs_per_s", "produce, msgs/s"), ("produce_p99_ms", "produce p99, ms"),
                  ("produce_p999_ms", "produce p99.9, ms"), ("consume_mb_per_s", "consume, MB/s")]:
    print(f"| {name} | " + " | ".join(cell(s, key) for s in systems)
          + f" | {ratio('weir-durable', 'kafka-default', key)} | {ratio('weir-durable', 'kafka-durable', key)} |")
PY
