#!/usr/bin/env bash
# A partition of SIZE_GIB (10) GiB moves to another host with Kafka's
# kafka-reassign-partitions.sh --throttle THROTTLE (50 MB/s) while loadgen produces at a
# fixed RATE (1 KiB messages, acks=all) to a topic of 3 partitions with RF 3, one led by
# each host: that topic's produce latency for PHASE seconds before the move and for
# PHASE seconds during it, in the same run, and how long the move took (the copy at
# the throttle's rate). Release build; three hosts on 127.0.0.1-3 (benches/broker.sh).
# Writes target/bench-data/reassign-throttle.json and prints a table.
#
#   bash benches/reassign_throttle.sh
#   SIZE_GIB=2 THROTTLE=20000000 bash benches/reassign_throttle.sh
#
# Run on an idle machine; it needs twice SIZE_GIB of free disk.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_GIB=${SIZE_GIB:-10}
THROTTLE=${THROTTLE:-50000000}
RATE=${RATE:-5000}
PHASE=${PHASE:-60}
PORT=${PORT:-29892}
CPORT=${CPORT:-29891}
source benches/broker.sh
cargo build --release --quiet -p weir -p loadgen
mvn -B -q -Dmaven.repo.local=target/m2 -f tests/jvm/pom.xml compile
classpath="target/jvm/classes:$(cat target/jvm/classpath.txt)"
start_cluster "$PORT" "$CPORT"
bootstrap=127.0.0.1:$PORT
weir=target/release/weir
runs=$dir/runs
mkdir -p "$runs"
$weir topics --bootstrap "$bootstrap" create big --partitions 1 --replication-factor 1 > /dev/null
$weir topics --bootstrap "$bootstrap" create busy --partitions 3 --replication-factor 3 > /dev/null
sleep 2
message=65536
echo "writing $SIZE_GIB GiB to big" >&2
target/release/loadgen produce --bootstrap "$bootstrap" --topic big --message-size "$message" \
  --batch-bytes 524288 --acks 1 --cores 0 --messages $((SIZE_GIB * 1024 * 1024 * 1024 / message)) \
  --out "$runs/fill" > "$runs/fill.log" 2>&1 || { cat "$runs/fill.log" >&2; exit 1; }
end=$(kcat -b "$bootstrap" -Q -t big:0:-1 | awk '{print $NF}')
if [ "$end" -ne $((SIZE_GIB * 1024 * 1024 * 1024 / message)) ]; then
  echo "big holds $end messages, not $SIZE_GIB GiB:" >&2; cat "$runs/fill.log" >&2; exit 1
fi
busy() {  # busy LABEL: produces to busy at RATE for PHASE seconds
  target/release/loadgen produce --bootstrap "$bootstrap" --topic busy --message-size 1024 \
    --batch-bytes 65536 --acks all --cores 0 --rate "$RATE" --duration "${PHASE}s" --warmup 3s \
    --label "$1" --out "$runs/$1" > "$runs/$1.log" 2>&1 || { cat "$runs/$1.log" >&2; exit 1; }
}
# The fill's writeback must not weigh on the phase before the move.
sync
sleep 20
echo "produce latency before the move" >&2
busy before
# The plan: big's partition to a host that lacks it.
plan=$runs/plan.json
"$py" - "$bootstrap" "$plan" <<'PY'
import json, subprocess, sys
meta = json.loads(subprocess.run(["kcat", "-b", sys.argv[1], "-L", "-t", "big", "-J"],
                                 capture_output=True, check=True, text=True).stdout)
leader = meta["topics"][0]["partitions"][0]["leader"]
target = next(n for n in (1024, 2048, 3072) if n != leader)
json.dump({"version": 1, "partitions": [{"topic": "big", "partition": 0, "replicas": [target]}]},
          open(sys.argv[2], "w"))
print(f"moving big-0 from {leader} to {target}", file=sys.stderr)
PY
reassign() {
  java -cp "$classpath" org.apache.kafka.tools.reassign.ReassignPartitionsCommand \
    --bootstrap-server "$bootstrap" --reassignment-json-file "$plan" "$@" 2>/dev/null
}
started=$(date +%s.%N)
reassign --execute --throttle "$THROTTLE" > "$runs/execute.log"
echo "produce latency during the move" >&2
busy during
while ! reassign --verify | grep -q "is completed"; do sleep 1; done
finished=$(date +%s.%N)
target/release/loadgen compare "$runs/before" "$runs/during" \
  --plot tuning/results/reassign-throttle.svg > /dev/null
"$py" - "$runs" "$started" "$finished" "$SIZE_GIB" "$THROTTLE" "$RATE" <<'PY'
import json, sys
runs, started, finished, gib, throttle, rate = sys.argv[1:7]
seconds = float(finished) - float(started)
lat = {p: json.load(open(f"{runs}/{p}/summary.json"))["latency_ms"]["produce"] for p in ("before", "during")}
row = {"size_gib": int(gib), "throttle_bytes_per_s": int(throttle), "move_s": round(seconds, 1),
       "copy_mb_per_s": round(int(gib) * 1024**3 / seconds / 1e6, 1), "rate_msgs_per_s": int(rate),
       **{f"{p}_{k}_ms": lat[p][k] for p in lat for k in ("p50", "p99", "p99_9")}}
json.dump(row, open("target/bench-data/reassign-throttle.json", "w"), indent=1)
print(f"| {gib} GiB moved under a {int(throttle) / 1e6:.0f} MB/s throttle | {seconds:.0f} s "
      f"({row['copy_mb_per_s']} MB/s) |")
print("| produce latency of the other topic (RF 3, acks=all, "
      f"{int(rate):,} msgs/s) | before | during | during / before |")
print("|---|---|---|---|")
for k, name in (("p50", "p50"), ("p99", "p99"), ("p99_9", "p99.9")):
    b, d = lat["before"][k], lat["during"][k]
    print(f"| {name} ms | {b:.2f} | {d:.2f} | {d / b:.2f} |")
PY
