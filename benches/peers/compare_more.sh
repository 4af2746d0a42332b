#!/usr/bin/env bash
# The side-by-side's remaining workloads, weir durable beside Kafka default (one host,
# each broker on core 1, loadgen on core 0, alternating within each of RUNS rounds, a
# fresh broker and data directory each time, all on this project's disk):
#   (4) consume: BIG_GIB of 1 KiB records written to 8 partitions at full speed, then
#       CONSUME_GIB of them read from the start at once ("hot", just written), and again
#       after a kill -9, the page cache dropped and a restart ("cold"): MB/s;
#   (7) recovery: the time from starting the killed broker again, with BIG_GIB on disk,
#       until a produce (acks=all) is first acknowledged;
#   (6) 1,000 partitions at a low rate (LOW_RATE msgs/s in all): produce p99 and peak
#       resident memory. The topic is created (Kafka's TopicCommand, for both) and every
#       partition has a leader, then one record goes to each partition, before the
#       measured run, so it measures the rate and not the creation; both times are rows.
#
#   bash benches/peers/compare_more.sh                 # RUNS=2, BIG_GIB=10, CONSUME_GIB=5
#   RUNS=1 BIG_GIB=2 CONSUME_GIB=1 bash benches/peers/compare_more.sh   # a quick try
#   PARTS=p1000 bash benches/peers/compare_more.sh      # only (6); PARTS=big only (4) and (7)
#
# Needs root (drop_caches). Writes target/bench-data/peers-more/ and prints Markdown.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-2}
BIG_GIB=${BIG_GIB:-10}
CONSUME_GIB=${CONSUME_GIB:-5}
LOW_RATE=${LOW_RATE:-10000}
PARTS=${PARTS:-big p1000}
PORT=${PORT:-29192}
source benches/broker.sh
cargo build --release --quiet -p loadgen
cp=$(bash benches/peers/kafka.sh classpath)
out=target/bench-data/peers-more
rows="$out/rows.jsonl"
rm -rf "$out"
mkdir -p "$out"
systems=(weir-durable kafka-default)
source benches/peers/lib.sh

big=$((BIG_GIB * 1024 * 1024))
consume=$((CONSUME_GIB * 1024 * 1024))

# restart_timed SYSTEM DIR: starts the broker again on DIR; sets $pid, and $seconds to
# the time until a one-record acks=all produce is acknowledged.
restart_timed() {
  local system=$1 dir=$2 t0
  ports_free
  t0=$(date +%s.%N)
  case $system in
    weir-*)
      target/release/weir serve --listen 127.0.0.1:"$PORT" --shards 1 --cores 1 \
        --data-dir "$dir" --metrics-listen off --log-level warn >> "$dir.log" 2>&1 &
      ;;
    kafka-*)
      bash benches/peers/kafka.sh start "$dir" 1 127.0.0.1 "$PORT" $((PORT + 1)) \
        "1@127.0.0.1:$((PORT + 1))" default 1 >> "$dir.log" 2>&1 &
      ;;
  esac
  pid=$!
  # loadgen refuses to write over an earlier run's results: each attempt gets a new dir.
  until rm -rf "$out/probe" && timeout 10 target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" \
    --topic big --partitions 8 --messages 1 --acks all --cores 0 --out "$out/probe" > /dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { echo "$system exited while recovering" >&2; exit 1; }
    sleep 0.1
  done
  seconds=$(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$t0")
}

# topics ARGS...: Kafka's TopicCommand against the broker on $PORT, on core 0.
topics() {
  taskset -c 0 java -Xms256m -Xmx256m -cp "$cp" -Dlog4j2.level=warn org.apache.kafka.tools.TopicCommand \
    --bootstrap-server 127.0.0.1:"$PORT" "$@"
}

for run in $(seq 1 "$RUNS"); do
  [[ " $PARTS " == *" big "* ]] || break
  order=("${systems[@]}")
  if [ $((run % 2)) -eq 0 ]; then order=("${systems[1]}" "${systems[0]}"); fi
  for system in "${order[@]}"; do
    dir=$(mktemp -d -p target/bench-data)
    start "$system" "$dir"
    s=$(lg produce "$system-fill-r$run" --topic big --partitions 8 --messages "$big")
    row "$(jq -c --argjson run "$run" --arg system "$system" \
      '{run:$run, system:$system, workload:"fill", msgs_per_s:.produce.messages_per_second}' <<< "$s")"
    s=$(lg consume "$system-hot-r$run" --topic big --from earliest --messages "$consume" --fetch-bytes 52428800)
    row "$(jq -c --argjson run "$run" --arg system "$system" \
      '{run:$run, system:$system, workload:"consume-hot", mb_per_s:.consume.megabytes_per_second}' <<< "$s")"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    sync
    echo 3 > /proc/sys/vm/drop_caches
    restart_timed "$system" "$dir"
    row "{\"run\":$run,\"system\":\"$system\",\"workload\":\"recovery\",\"seconds\":$seconds}"
    sync
    echo 3 > /proc/sys/vm/drop_caches
    s=$(lg consume "$system-cold-r$run" --topic big --from earliest --messages "$consume" --fetch-bytes 52428800)
    row "$(jq -c --argjson run "$run" --arg system "$system" \
      '{run:$run, system:$system, workload:"consume-cold", mb_per_s:.consume.megabytes_per_second}' <<< "$s")"
    stop
    rm -rf "$dir" "$dir.log"
  done
done

for run in $(seq 1 "$RUNS"); do
  [[ " $PARTS " == *" p1000 "* ]] || break
  order=("${systems[@]}")
  if [ $((run % 2)) -eq 0 ]; then order=("${systems[1]}" "${systems[0]}"); fi
  for system in "${order[@]}"; do
    dir=$(mktemp -d -p target/bench-data)
    start "$system" "$dir"
    name="$system-p1000-r$run"
    t0=$(date +%s.%N)
    topics --create --topic p1000 --partitions 1000 --replication-factor 1 > "$out/$name.create.log" 2>&1
    # Every partition led: the description lists 1,000 partitions with a leader.
    for _ in $(seq 1 300); do
      [ "$(topics --describe --topic p1000 2>/dev/null | grep -c 'Leader: [0-9]')" = 1000 ] && break
      sleep 1
    done
    created=$(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$t0")
    row "{\"run\":$run,\"system\":\"$system\",\"workload\":\"p1000-create\",\"seconds\":$created}"
    # A first record to every partition (weir opens new partitions' logs in the
    # background, Kafka creates them with their leaders): its time is a row, and the
    # measured run then sees partitions in use.
    t0=$(date +%s.%N)
    lg produce "$name-first" --topic p1000 --partitions 1000 --messages 1000 > /dev/null
    first=$(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$t0")
    row "{\"run\":$run,\"system\":\"$system\",\"workload\":\"p1000-first\",\"seconds\":$first}"
    ( while kill -0 "$pid" 2>/dev/null; do rss_kib "$pid"; sleep 1; done ) > "$out/$name.rss" &
    sampler=$!
    s=$(lg produce "$name" --topic p1000 --partitions 1000 --rate "$LOW_RATE" --warmup 10s --duration 30s)
    kill "$sampler"
    wait "$sampler" 2>/dev/null || true
    peak=$(sort -n "$out/$name.rss" | tail -1)
    row "$(jq -c --argjson run "$run" --arg system "$system" --argjson peak "$peak" \
      '{run:$run, system:$system, workload:"p1000", p99_ms:.latency_ms.produce.p99,
        p99_9_ms:.latency_ms.produce.p99_9, rss_kib:$peak}' <<< "$s")"
    stop
    rm -rf "$dir" "$dir.log"
  done
done

python3 - "$rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def vals(system, workload, key):
    return [r[key] for r in sorted(rows, key=lambda r: r["run"]) if r["system"] == system and r["workload"] == workload]
def cell(v, fmt):
    return f"{fmt(statistics.median(v))} ({', '.join(fmt(x) for x in v)})" if v else "–"
def ratio(a, b):
    return cell([x / y for x, y in zip(a, b) if y], lambda v: f"{v:.2f}")
print("| workload | weir durable | Kafka default | weir ÷ Kafka |")
print("|---|---|---|---|")
for w, key, label, fmt in (
    ("fill", "msgs_per_s", "fill, msgs/s", lambda v: f"{v:,.0f}"),
    ("consume-hot", "mb_per_s", "consume just written, MB/s", lambda v: f"{v:,.0f}"),
    ("consume-cold", "mb_per_s", "consume after restart, caches dropped, MB/s", lambda v: f"{v:,.0f}"),
    ("recovery", "seconds", "kill -9 → first acknowledged produce, s", lambda v: f"{v:.2f}"),
    ("p1000-create", "seconds", "1,000 partitions: create until all led, s", lambda v: f"{v:.1f}"),
    ("p1000-first", "seconds", "1,000 partitions: then a record to each, s", lambda v: f"{v:.1f}"),
    ("p1000", "p99_ms", "1,000 partitions: produce p99, ms", lambda v: f"{v:.1f}"),
    ("p1000", "p99_9_ms", "1,000 partitions: produce p99.9, ms", lambda v: f"{v:.1f}"),
    ("p1000", "rss_kib", "1,000 partitions: peak RSS, MiB", lambda v: f"{v / 1024:,.0f}"),
):
    a, b = vals("weir-durable", w, key), vals("kafka-default", w, key)
    print(f"| {label} | {cell(a, fmt)} | {cell(b, fmt)} | {ratio(a, b)} |")
PY
