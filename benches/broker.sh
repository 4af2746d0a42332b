# Shared by the broker benchmark scripts (sourced, not run): builds the release broker,
# checks the Python clients are installed, and starts/stops one shard pinned to core 1
# on a fresh data directory. $weir is the broker binary (default target/release/weir).

cargo build --release --quiet --bin weir
py=target/pyenv/bin/python
[ -x "$py" ] || { echo "run bash tests/run-all.sh first (it installs the Python clients)"; exit 1; }
mkdir -p target/bench-data

# start_broker PORT [extra serve flags...]: sets $broker_pid and $broker_data.
start_broker() {
  local port=$1
  shift
  broker_data=$(mktemp -d -p target/bench-data)
  "${weir:-target/release/weir}" serve --listen 127.0.0.1:"$port" --shards 1 --cores 1 \
    --data-dir "$broker_data" --log-level warn "$@" &
  broker_pid=$!
  for _ in $(seq 1 100); do
    "$py" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && return
    sleep 0.1
  done
  echo "broker did not start on port $port" >&2
  exit 1
}

# stop_broker: clean stop, then removes the data directory.
stop_broker() {
  kill -TERM "$broker_pid"
  wait "$broker_pid" || true
  rm -rf "$broker_data"
}
