#!/usr/bin/env bash
# Kafka's own ProducerPerformance (kafka-tools 4.4.0, Java client defaults: batch.size
# 16 KiB, linger.ms 5, 5 requests in flight) beside loadgen set the same way, both
# producing 1 KiB records with acks=all to one 8-partition topic on one weir shard,
# alternating RUNS times on a fresh broker each, so the two clients' figures come from
# the same run. Prints each run and a Markdown table of the medians.
#
#   bash benches/java_producer_perf.sh             # RUNS=2, COUNT=300000
#   RUNS=3 COUNT=500000 bash benches/java_producer_perf.sh
#
# The broker's shard is pinned to core 1 and the clients to core 0. Run on an idle
# machine after `bash tests/run-all.sh` (it builds tests/jvm into target/jvm).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-2}
COUNT=${COUNT:-300000}
PORT=${PORT:-29092}
source benches/broker.sh
cargo build --release --quiet -p loadgen
[ -f target/jvm/classpath.txt ] || { echo "run bash tests/run-all.sh first (it builds tests/jvm)"; exit 1; }
cp="target/jvm/classes:$(cat target/jvm/classpath.txt)"
results=target/bench-data/java-producer-perf.jsonl
: > "$results"
for run in $(seq 1 "$RUNS"); do
  for client in ProducerPerformance loadgen; do
    start_broker "$PORT" --metrics-listen off
    target/release/weir topics --bootstrap 127.0.0.1:"$PORT" create perf --partitions 8 > /dev/null
    if [ "$client" = ProducerPerformance ]; then
      # Its last line: N records sent, R records/sec (M MB/sec), A ms avg latency,
      # X ms max latency, p50, p95, p99, p99.9 (ms).
      line=$(taskset -c 0 java -Xms1g -Xmx1g -cp "$cp" org.apache.kafka.tools.ProducerPerformance \
        --topic perf --num-records "$COUNT" --record-size 1024 --throughput -1 \
        --bootstrap-server 127.0.0.1:"$PORT" --command-property acks=all 2> /dev/null | tail -1)
      row=$(python3 - "$line" <<'PY'
import json, re, sys
line = sys.argv[1]
num = lambda pattern: float(re.search(pattern, line).group(1))
print(json.dumps({"msgs_per_s": num(r"([\d.]+) records/sec"), "mb_per_s": num(r"\(([\d.]+) MB/sec\)"),
                  "p50_ms": num(r"([\d.]+) ms 50th"), "p99_ms": num(r"([\d.]+) ms 99th"),
                  "p999_ms": num(r"([\d.]+) ms 99.9th"), "max_ms": num(r"([\d.]+) ms max latency")}))
PY
)
    else
      out=$(mktemp -d -p target/bench-data)
      target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" --topic perf --partitions 8 \
        --message-size 1024 --batch-bytes 16384 --linger 5ms --max-in-flight 5 --acks all \
        --messages "$COUNT" --cores 0 --out "$out" > "$out.log" 2>&1
      row=$(python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
lat = s["latency_ms"]["produce"]
mps = s["produce"]["messages_per_second"]
print(json.dumps({"msgs_per_s": mps, "mb_per_s": mps * 1024 / 1048576, "p50_ms": lat["p50"],
                  "p99_ms": lat["p99"], "p999_ms": lat["p99_9"], "max_ms": lat["max"]}))
PY
)
      rm -rf "$out" "$out.log"
    fi
    stop_broker
    echo "{\"run\": $run, \"client\": \"$client\", \"result\": $row}" >> "$results"
    echo "run $run $client: $row" >&2
  done
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| client | msgs/s (each run) | MB/s | p50 ms | p99 ms | p99.9 ms | max ms |")
print("|---|---|---|---|---|---|---|")
for c in ("ProducerPerformance", "loadgen"):
    r = [x["result"] for x in rows if x["client"] == c]
    med = lambda k: statistics.median(x[k] for x in r)
    runs = ", ".join(f"{x['msgs_per_s']:,.0f}" for x in r)
    print(f"| {c} | {med('msgs_per_s'):,.0f} ({runs}) | {med('mb_per_s'):.0f} | {med('p50_ms'):.1f} | "
          f"{med('p99_ms'):.1f} | {med('p999_ms'):.1f} | {med('max_ms'):.0f} |")
PY
