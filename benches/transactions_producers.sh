#!/usr/bin/env bash
# Transactional ÷ idempotent throughput as the producer count grows, with the broker's
# CPU per run: ROUNDS rounds, and in each a fresh broker (weir durable, one shard on
# core 1) per producer count of COUNTS, on which loadgen (core 0, the flags of
# benches/transactions.sh) runs 10 s idempotent and 10 s in transactions of 1,000
# messages, in alternating order. Broker CPU is the broker process's user + system time
# over the run's wall time (its shard thread, the blocking threads that write and sync
# LMDB, and the kernel work they cause); loadgen's likewise.
#
#   bash benches/transactions_producers.sh            # ROUNDS=2 COUNTS="4 8 16"
#
# Writes target/bench-data/transactions-producers/ and prints one line per count.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
COUNTS=${COUNTS:-"4 8 16"}
PORT=${PORT:-29292}
source benches/broker.sh
cargo build --release --quiet -p weir -p loadgen
out=target/bench-data/transactions-producers
rows=$out/rows.jsonl
rm -rf "$out"
mkdir -p "$out"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for round in $(seq 1 "$ROUNDS"); do
  for n in $COUNTS; do
    dir=$(mktemp -d -p target/bench-data)
    "${weir:-target/release/weir}" serve --listen 127.0.0.1:"$PORT" --shards 1 --cores 1 \
      --data-dir "$dir" --flush-mode fsync --metrics-listen off --log-level warn > "$dir.log" 2>&1 &
    pid=$!
    wait_for_broker 127.0.0.1 "$PORT"
    for topic in idem txn; do
      target/release/loadgen produce --bootstrap 127.0.0.1:"$PORT" --topic "$topic" --partitions 8 \
        --messages 8 --acks all --cores 0 --out "$out/probe" > /dev/null 2>&1
    done
    order=(idem txn)
    [ $((round % 2)) -eq 0 ] && order=(txn idem)
    for w in "${order[@]}"; do
      flags=(--idempotent)
      [ "$w" = txn ] && flags=(--transactional --transaction-size 1000)
      name=$w-$n-$round
      c0=$(cpu_ticks "$pid")
      t0=$(date +%s.%N)
      /usr/bin/time -f "%U %S %e" -o "$out/$name.time" target/release/loadgen produce \
        --bootstrap 127.0.0.1:"$PORT" --topic "$w" --partitions 8 --message-size 1024 \
        --acks all --batch-bytes 65536 --linger 5ms --max-in-flight 5 --cores 0 \
        --duration 10s --producers "$n" "${flags[@]}" --label "$name" --out "$out/$name" \
        > "$out/$name.log" 2>&1
      c1=$(cpu_ticks "$pid")
      t1=$(date +%s.%N)
      busy=$(echo "($c1 - $c0) / $(getconf CLK_TCK) / ($t1 - $t0)" | bc -l)
      lg=$(awk '{print ($1 + $2) / $3}' "$out/$name.time")
      jq -c --arg w "$w" --argjson n "$n" --argjson r "$round" --argjson busy "$busy" \
        --argjson lg "$lg" '{w:$w, n:$n, r:$r, msgs:.produce.messages_per_second, busy:$busy, lg:$lg}' \
        "$out/$name/summary.json" >> "$rows"
    done
    kill -TERM "$pid"
    wait "$pid" 2> /dev/null || true
    rm -rf "$dir" "$dir.log"
  done
done
python3 - "$rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for n in sorted({r["n"] for r in rows}):
    runs = []
    for r in sorted({r["r"] for r in rows}):
        i = [x for x in rows if x["n"] == n and x["r"] == r and x["w"] == "idem"]
        t = [x for x in rows if x["n"] == n and x["r"] == r and x["w"] == "txn"]
        if i and t:
            runs.append((t[0]["msgs"] / i[0]["msgs"], i[0], t[0]))
    print(f"producers {n}: transactional ÷ idempotent {statistics.median(x[0] for x in runs):.2f} ("
          + "; ".join(f"{x[0]:.2f}: {x[2]['msgs']:,.0f} / {x[1]['msgs']:,.0f} msgs/s, broker CPU "
                      f"{x[2]['busy']:.0%} / {x[1]['busy']:.0%}, loadgen {x[2]['lg']:.0%} / {x[1]['lg']:.0%}"
                      for x in runs) + ")")
PY
