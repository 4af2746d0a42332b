#!/usr/bin/env bash
# What security costs, on one shard (core 1) with loadgen on core 0, same run:
#  1. connections per second, each a full connect → (TLS handshake) → (SASL login) →
#     ApiVersions round trip → close, 8 at a time (`loadgen connect`): plaintext, TLS,
#     SASL_PLAINTEXT with SCRAM-SHA-512, SASL_SSL with SCRAM-SHA-512 and with PLAIN;
#  2. produce throughput (acks=all, 1 KiB messages, 256 KiB batches, 4 partitions, open
#     throttle) over plaintext with nothing enforced against SASL_PLAINTEXT
#     (SCRAM-SHA-512) with --authorizer acl and 100 ACLs of other principals beside the
#     producer's WRITE — the per-request cost of the login and the ACL check.
# RUNS alternating runs of each; prints every run and the medians. Certificates are made
# with openssl for this run.
#
#   bash benches/security_ab.sh
#   RUNS=5 bash benches/security_ab.sh
#
# Run on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
PORT=${PORT:-29792}
TLS_PORT=${TLS_PORT:-29892}
source benches/broker.sh
cargo build --release --quiet -p loadgen
make_pki
tls=(--tls-listen 127.0.0.1:"$TLS_PORT" --tls-cert "$pki/server.pem" --tls-key "$pki/server.key")
sasl=(--sasl-mechanisms SCRAM-SHA-512,PLAIN --sasl-user admin:bench-admin)
results=target/bench-data/security-ab.jsonl
: > "$results"
row() { "$py" -c "import json,sys; print(json.dumps(dict(json.loads(sys.argv[1]), **json.loads(sys.argv[2]))))" "$1" "$2" >> "$results"; }

connect() {  # connect LABEL RUN [loadgen connect flags...]
  local label=$1 run=$2
  shift 2
  local out
  out=$(target/release/loadgen connect --core 0 --concurrency 8 --duration 5s "$@" | tail -1)
  echo "run $run $label: $out" >&2
  row "$out" "{\"part\": \"connect\", \"label\": \"$label\", \"run\": $run}"
}

produce() {  # produce LABEL RUN [loadgen produce flags...]
  local label=$1 run=$2
  shift 2
  local out
  out=$(mktemp -d -p target/bench-data)
  target/release/loadgen produce --topic "sec-$label-$run" --partitions 4 --message-size 1024 \
    --batch-bytes 262144 --cores 0 --duration "${DURATION}s" --warmup 3s --out "$out" "$@" \
    > "$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
  local rate
  rate=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['produce']['messages_per_second'])" "$out/summary.json")
  echo "run $run $label: produce $rate msgs/s" >&2
  row "{\"per_second\": $rate}" "{\"part\": \"produce\", \"label\": \"$label\", \"run\": $run}"
  rm -rf "$out" "$out.log"
}

for run in $(seq 1 "$RUNS"); do
  # 1. Handshakes: without SASL, then with it.
  start_broker "$PORT" --metrics-listen off "${tls[@]}"
  connect plaintext "$run" --bootstrap 127.0.0.1:"$PORT"
  connect tls "$run" --bootstrap 127.0.0.1:"$TLS_PORT" --tls-ca "$pki/ca.pem"
  stop_broker
  start_broker "$PORT" --metrics-listen off "${tls[@]}" "${sasl[@]}"
  connect sasl-scram512 "$run" --bootstrap 127.0.0.1:"$PORT" --sasl-user admin:bench-admin
  connect tls-scram512 "$run" --bootstrap 127.0.0.1:"$TLS_PORT" --tls-ca "$pki/ca.pem" \
    --sasl-user admin:bench-admin
  connect tls-plain "$run" --bootstrap 127.0.0.1:"$TLS_PORT" --tls-ca "$pki/ca.pem" \
    --sasl-user admin:bench-admin --sasl-mechanism PLAIN
  stop_broker
  # 2. Produce: open against logged-in and authorised (order alternates).
  order="open secured"
  if [ $((run % 2)) -eq 0 ]; then order="secured open"; fi
  for mode in $order; do
    if [ "$mode" = open ]; then
      start_broker "$PORT" --metrics-listen off
      produce open "$run" --bootstrap 127.0.0.1:"$PORT"
    else
      start_broker "$PORT" --metrics-listen off "${sasl[@]}" --authorizer acl \
        --super-users User:admin
      a=(--bootstrap 127.0.0.1:"$PORT" --sasl-user admin:bench-admin)
      target/release/weir users "${a[@]}" create producer --password bench-producer > /dev/null
      for i in $(seq 1 100); do
        target/release/weir acls "${a[@]}" add --principal "User:other-$i" --operation read \
          --topic "other-$i-" --prefixed > /dev/null
      done
      target/release/weir acls "${a[@]}" add --principal User:producer --operation all \
        --topic sec- --prefixed > /dev/null
      target/release/weir acls "${a[@]}" add --principal User:producer --operation create \
        --cluster > /dev/null
      produce secured "$run" --bootstrap 127.0.0.1:"$PORT" --sasl-user producer:bench-producer
    fi
    stop_broker
  done
done
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda part, label, key: statistics.median(r[key] for r in rows if r["part"] == part and r["label"] == label)
print("| connection | connections/s (median) | connect-to-answer p50 ms | p99 ms |")
print("|---|---|---|---|")
for label, name in (("plaintext", "plaintext"), ("tls", "TLS"), ("sasl-scram512", "SASL_PLAINTEXT SCRAM-SHA-512"),
                    ("tls-scram512", "SASL_SSL SCRAM-SHA-512"), ("tls-plain", "SASL_SSL PLAIN")):
    print(f"| {name} | {med('connect', label, 'per_second'):,.0f} | {med('connect', label, 'p50_ms'):.2f} | {med('connect', label, 'p99_ms'):.2f} |")
o, s = med("produce", "open", "per_second"), med("produce", "secured", "per_second")
print()
print("| produce (acks=all) | msgs/s (median) |")
print("|---|---|")
print(f"| plaintext, nothing enforced | {o:,.0f} |")
print(f"| SASL SCRAM-SHA-512 + ACLs (102) | {s:,.0f} ({s / o:.3f}×) |")
PY
rm -rf "$pki"
