#!/usr/bin/env bash
# TLS against plaintext on the same broker in the same run: one shard on core 1 serving
# both listeners, loadgen on core 0 producing (acks=all, 1 KiB messages, 256 KiB batches,
# 4 partitions, open throttle) and then consuming the topic from the start, over
# plaintext and over TLS in turn (which goes first alternates), RUNS times. Prints each
# run and the TLS / plaintext ratio of the medians; then p99 produce latency at 50% of
# the plaintext maximum over each. Certificates are made with openssl for this run.
#
#   bash benches/tls_ab.sh
#   RUNS=5 DURATION=15 bash benches/tls_ab.sh
#
# Run on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
PORT=${PORT:-29592}
TLS_PORT=${TLS_PORT:-29692}
source benches/broker.sh
cargo build --release --quiet -p loadgen
make_pki
results=target/bench-data/tls-ab.jsonl
: > "$results"
lg() {  # lg MODE LISTENER LABEL [extra loadgen flags...]
  local mode=$1 listener=$2 label=$3
  shift 3
  local out tls=()
  out=$(mktemp -d -p target/bench-data)
  if [ "$listener" = tls ]; then
    tls=(--bootstrap 127.0.0.1:"$TLS_PORT" --tls-ca "$pki/ca.pem")
  else
    tls=(--bootstrap 127.0.0.1:"$PORT")
  fi
  target/release/loadgen "$mode" "${tls[@]}" --topic "ab-$label" --partitions 4 \
    --message-size 1024 --batch-bytes 262144 --cores 0 --label "$label" --out "$out" "$@" \
    > "$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
  cat "$out/summary.json"
  rm -rf "$out" "$out.log"
}
for run in $(seq 1 "$RUNS"); do
  order="plaintext tls"
  if [ $((run % 2)) -eq 0 ]; then order="tls plaintext"; fi
  for listener in $order; do
    start_broker "$PORT" --tls-listen 127.0.0.1:"$TLS_PORT" --tls-cert "$pki/server.pem" \
      --tls-key "$pki/server.key"
    produced=$(lg produce "$listener" "$listener-$run" --duration "${DURATION}s" --warmup 3s)
    consumed=$(lg consume "$listener" "$listener-$run" --from earliest --messages 2000000)
    stop_broker
    "$py" - "$run" "$listener" "$results" "$produced" "$consumed" <<'PY'
import json, sys
run, listener, results, produced, consumed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
p, c = json.loads(produced), json.loads(consumed)
row = {"run": int(run), "listener": listener,
       "produce_msgs_per_s": p["produce"]["messages_per_second"],
       "consume_msgs_per_s": c["consume"]["messages_per_second"]}
open(results, "a").write(json.dumps(row) + "\n")
print(f"run {run} {listener}: produce {row['produce_msgs_per_s']:,.0f} msgs/s, consume {row['consume_msgs_per_s']:,.0f} msgs/s", file=sys.stderr)
PY
  done
done
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| direction | plaintext msgs/s (median) | TLS msgs/s (median) | TLS / plaintext |")
print("|---|---|---|---|")
for key, name in (("produce_msgs_per_s", "produce (acks=all)"), ("consume_msgs_per_s", "consume (fetch)")):
    plain = statistics.median(r[key] for r in rows if r["listener"] == "plaintext")
    tls = statistics.median(r[key] for r in rows if r["listener"] == "tls")
    print(f"| {name} | {plain:,.0f} | {tls:,.0f} | {tls / plain:.3f} |")
PY
rm -rf "$pki"
