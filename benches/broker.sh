# Shared by the broker benchmark scripts (sourced, not run): builds the release broker,
# checks the Python clients are installed, starts/stops one shard pinned to core 1 on a
# fresh data directory, or starts a three-host cluster on loopback. $weir is the broker
# binary (default target/release/weir).

cargo build --release --quiet --bin weir
py=target/pyenv/bin/python
[ -x "$py" ] || { echo "run bash tests/run-all.sh first (it installs the Python clients)"; exit 1; }
mkdir -p target/bench-data

# make_pki: a CA and a server certificate for 127.0.0.1, made with openssl in a fresh
# directory under target/bench-data; sets $pki (ca.pem, server.pem, server.key).
make_pki() {
  pki=$(mktemp -d -p target/bench-data)
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.pem" -days 2 \
    -subj "/CN=weir bench CA" 2> /dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$pki/server.key" -out "$pki/server.csr" \
    -subj "/CN=127.0.0.1" 2> /dev/null
  printf "subjectAltName=IP:127.0.0.1" > "$pki/ext"
  openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" \
    -CAcreateserial -out "$pki/server.pem" -days 2 -extfile "$pki/ext" 2> /dev/null
}

# wait_for_broker HOST PORT [TRIES]: waits until HOST:PORT accepts connections, trying
# every 0.1 s (100 tries by default); exits the script when it never does.
wait_for_broker() {
  local host=$1 port=$2 tries=${3:-100}
  for _ in $(seq 1 "$tries"); do
    "$py" -c "import socket; socket.create_connection(('$host', $port), 0.2)" 2>/dev/null && return
    sleep 0.1
  done
  echo "broker did not start on $host:$port" >&2
  exit 1
}

# start_broker PORT [extra serve flags...]: sets $broker_pid and $broker_data.
start_broker() {
  local port=$1
  shift
  broker_data=$(mktemp -d -p target/bench-data)
  "${weir:-target/release/weir}" serve --listen 127.0.0.1:"$port" --shards 1 --cores 1 \
    --data-dir "$broker_data" --log-level warn "$@" &
  broker_pid=$!
  wait_for_broker 127.0.0.1 "$port"
}

# stop_broker: clean stop, then removes the data directory.
stop_broker() {
  kill -TERM "$broker_pid"
  wait "$broker_pid" || true
  rm -rf "$broker_data"
}

# start_cluster PORT CPORT: three release hosts on 127.0.0.1-3 (one shard each, hosts 1
# and 3 on core 1, host 2 on core 0, auto-creation off) on a fresh $dir, a voter each
# with its controller on CPORT; waits until they serve and stops them (removing $dir)
# when the script exits. Sets $dir and $pids.
start_cluster() {
  local port=$1 cport=$2 i
  dir=$(mktemp -d -p target/bench-data)
  local voters="1@127.0.0.1:$cport,2@127.0.0.2:$cport,3@127.0.0.3:$cport"
  pids=()
  trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait || true; rm -rf "$dir"' EXIT
  for i in 1 2 3; do
    "${weir:-target/release/weir}" serve --node-id "$i" --controller-quorum-voters "$voters" \
      --listen "127.0.0.$i:$port" --advertise "127.0.0.$i" --shards 1 --cores $((i % 2)) \
      --data-dir "$dir/h$i" --metrics-listen off --auto-create-topics false --log-level warn &
    pids+=($!)
  done
  for i in 1 2 3; do
    wait_for_broker "127.0.0.$i" "$port" 300
  done
}
