#!/usr/bin/env bash
# Workload 5 of the side-by-side: RF 3 on three hosts on this machine (127.0.0.1-3), weir
# (durable, its default) beside Apache Kafka 4.4.0 (default profile), alternating RUNS
# times, a fresh cluster each time. One 8-partition topic with replication factor 3 and
# min.insync.replicas 2; loadgen produces 1 KiB records with acks=all (64 KiB batches,
# linger 5 ms, 5 in flight, 3 s warm-up, DURATION measured). Hosts 1 and 3 run on core 1,
# host 2 and loadgen on core 0, for both systems. All three hosts share this one disk, so
# each acknowledged byte is written three times to it: compare RF 3 with RF 3, not with RF 1.
#
#   bash benches/peers/compare_rf3.sh             # RUNS=2, DURATION=15s
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-2}
DURATION=${DURATION:-15s}
PORT=${PORT:-29192}
CPORT=${CPORT:-29193}
source benches/broker.sh
cargo build --release --quiet -p loadgen
cp=$(bash benches/peers/kafka.sh classpath)
out=target/bench-data/peers-rf3
rm -rf "$out"
mkdir -p "$out"
rows="$out/rows.jsonl"
voters="1@127.0.0.1:$CPORT,2@127.0.0.2:$CPORT,3@127.0.0.3:$CPORT"
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT

start() {  # start SYSTEM DIR: three hosts; sets pids
  local system=$1 dir=$2 i
  pids=()
  for i in 1 2 3; do
    if [ "$system" = weir ]; then
      target/release/weir serve --node-id "$i" --controller-quorum-voters "$voters" \
        --listen "127.0.0.$i:$PORT" --advertise "127.0.0.$i" --shards 1 --cores $((i % 2)) \
        --data-dir "$dir/h$i" --metrics-listen off --log-level warn &
    else
      bash benches/peers/kafka.sh start "$dir/h$i" "$i" "127.0.0.$i" "$PORT" "$CPORT" "$voters" \
        default $((i % 2)) > "$dir/h$i.log" 2>&1 &
    fi
    pids+=($!)
  done
  for i in 1 2 3; do wait_for_broker "127.0.0.$i" "$PORT" 600; done
}

stop() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

create() {  # create SYSTEM: the RF 3 topic, retried until three hosts are registered
  local system=$1
  for _ in $(seq 1 60); do
    if [ "$system" = weir ]; then
      target/release/weir topics --bootstrap 127.0.0.1:"$PORT" create rf3 --partitions 8 \
        --replication-factor 3 --config min.insync.replicas=2 > /dev/null 2>&1 && return
    else
      java -cp "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:"$PORT" \
        --create --topic rf3 --partitions 8 --replication-factor 3 \
        --config min.insync.replicas=2 > /dev/null 2>&1 && return
    fi
    sleep 1
  done
  echo "$system: no RF 3 topic" >&2
  exit 1
}

for run in $(seq 1 "$RUNS"); do
  for system in weir kafka; do
    dir=$(mktemp -d -p target/bench-data)
    start "$system" "$dir"
    create "$system"
    name="$system-rf3-r$run"
    target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" --topic rf3 --message-size 1024 \
      --acks all --batch-bytes 65536 --linger 5ms --max-in-flight 5 --warmup 3s \
      --duration "$DURATION" --cores 0 --label "$name" --out "$out/$name" > "$out/$name.log" 2>&1
    row=$(jq -c --argjson run "$run" --arg system "$system" \
      '{run:$run, system:$system, msgs_per_s:.produce.messages_per_second,
        p50_ms:.latency_ms.produce.p50, p99_ms:.latency_ms.produce.p99,
        p999_ms:.latency_ms.produce.p99_9}' "$out/$name/summary.json")
    echo "$row" >> "$rows"
    echo "$row" >&2
    stop
    rm -rf "$dir"
  done
done
python3 - "$rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| RF 3, 8 partitions | msgs/s (each run) | p50 ms | p99 ms | p99.9 ms |")
print("|---|---|---|---|---|")
for s in ("weir", "kafka"):
    r = [x for x in rows if x["system"] == s]
    m = lambda k: statistics.median(x[k] for x in r)
    runs = ", ".join(f"{x['msgs_per_s']:,.0f}" for x in r)
    print(f"| {s} | {m('msgs_per_s'):,.0f} ({runs}) | "
          f"{m('p50_ms'):.1f} | {m('p99_ms'):.1f} | {m('p999_ms'):.1f} |")
w = [x["msgs_per_s"] for x in rows if x["system"] == "weir"]
k = [x["msgs_per_s"] for x in rows if x["system"] == "kafka"]
ratios = [a / b for a, b in zip(w, k)]
print(f"\nweir ÷ Kafka throughput per run: {', '.join(f'{x:.2f}' for x in ratios)}")
PY
