# The brokers and the client of benches/peers/compare*.sh, sourced by them: each sets
# PORT (the broker's, +1 for Kafka's controller), $out (where runs go) and $rows (the
# JSON lines of results) first. One broker at a time, pinned to core 1; loadgen on core 0.
# $weir names the weir binary to run (default target/release/weir), for an A/B of builds.

# ports_free: waits until $PORT and $PORT + 1 can be bound (a weir that exited releases
# its io_uring-held sockets a little later; the next broker must not find them taken,
# nor a client find the last broker still answering).
ports_free() {
  for _ in $(seq 1 100); do
    python3 -c "import socket
for p in ($PORT, $PORT + 1):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', p)); s.close()" \
      2>/dev/null && return
    sleep 0.1
  done
  echo "port $PORT or $((PORT + 1)) is taken" >&2
  exit 1
}

stop() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
  ports_free
}
pid=
trap '[ -z "$pid" ] || { kill -TERM "$pid"; wait "$pid"; } 2>/dev/null || true' EXIT

# start SYSTEM DIR: starts the broker on $PORT; sets $pid (the broker process itself).
start() {
  local system=$1 dir=$2
  ports_free
  case $system in
    weir-*)
      local mode=fsync
      [ "$system" = weir-write-only ] && mode=write-only
      "${weir:-target/release/weir}" serve --listen 127.0.0.1:"$PORT" --shards 1 --cores 1 \
        --data-dir "$dir" --flush-mode "$mode" --metrics-listen off --log-level warn &
      pid=$!
      ;;
    kafka-*)
      bash benches/peers/kafka.sh start "$dir" 1 127.0.0.1 "$PORT" $((PORT + 1)) \
        "1@127.0.0.1:$((PORT + 1))" "${system#kafka-}" 1 > "$dir.log" 2>&1 &
      pid=$!
      ;;
  esac
  wait_for_broker 127.0.0.1 "$PORT" 600
  kill -0 "$pid" 2>/dev/null || { echo "$system exited at start" >&2; exit 1; }
}

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

# lg MODE NAME [flags]: one loadgen run into $out/NAME; prints its summary.json.
lg() {
  local mode=$1 name=$2
  shift 2
  target/release/loadgen "$mode" --bootstrap 127.0.0.1:"$PORT" --message-size 1024 \
    --acks all --batch-bytes 65536 --linger 5ms --max-in-flight 5 \
    --cores 0 --label "$name" --out "$out/$name" "$@" > "$out/$name.log" 2>&1
  cat "$out/$name/summary.json"
}

row() { echo "$1" >> "$rows"; echo "$1" >&2; }
