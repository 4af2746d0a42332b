#!/usr/bin/env bash
# Apache Kafka 4.4.0 from its Maven jars, as weir's reference peer on this machine.
#
#   bash benches/peers/kafka.sh classpath
#       resolves the pinned broker and tools (benches/peers/pom.xml) into target/m2 and
#       prints the class path
#   bash benches/peers/kafka.sh start DIR NODE HOST PORT CPORT VOTERS PROFILE [CORES]
#       formats DIR (once) and runs node NODE in the foreground as a combined broker and
#       KRaft controller: clients on HOST:PORT, the controller on HOST:CPORT, VOTERS the
#       quorum (`1@127.0.0.1:9093,...`); PROFILE is `default` (Kafka's settings: the page
#       cache decides when data reaches the disk) or `durable` (log.flush.interval.messages=1:
#       every appended batch is fsynced before it is acknowledged, like weir's default);
#       CORES pins the JVM (taskset list)
#
# Heap and JVM flags are kafka-server-start.sh's and kafka-run-class.sh's defaults
# (-Xmx1G -Xms1G, G1 with a 20 ms pause goal); every broker setting not written below
# is Kafka's default. Sourced by benches/peers/compare.sh and tests/peer_kafka.rs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

classpath() {
  if [ ! -s "$root/target/peers/classpath.txt" ]; then
    mvn -B -q -Dmaven.repo.local="$root/target/m2" -f "$root/benches/peers/pom.xml" validate >&2
  fi
  cat "$root/target/peers/classpath.txt"
}

start() {
  local dir=$1 node=$2 host=$3 port=$4 cport=$5 voters=$6 profile=$7 cores=${8:-}
  local cp
  cp=$(classpath)
  mkdir -p "$dir"
  local props="$dir/server.properties"
  cat > "$props" <<PROPS
process.roles=broker,controller
node.id=$node
controller.quorum.voters=$voters
listeners=PLAINTEXT://$host:$port,CONTROLLER://$host:$cport
advertised.listeners=PLAINTEXT://$host:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
# Internal topics as replicated as the cluster allows (1 on one host, 3 on three).
offsets.topic.replication.factor=$(( $(tr -cd ',' <<< "$voters" | wc -c) + 1 ))
transaction.state.log.replication.factor=$(( $(tr -cd ',' <<< "$voters" | wc -c) + 1 ))
transaction.state.log.min.isr=1
# Benchmarks and tests start groups at once (Kafka's own test configs do the same).
group.initial.rebalance.delay.ms=0
PROPS
  if [ "$profile" = durable ]; then
    echo "log.flush.interval.messages=1" >> "$props"
  elif [ "$profile" != default ]; then
    echo "PROFILE is default or durable, not $profile" >&2
    exit 2
  fi
  local java=(java -Xmx1G -Xms1G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
    -Djava.awt.headless=true -cp "$cp")
  if [ -n "$cores" ]; then
    java=(taskset -c "$cores" "${java[@]}")
  fi
  if [ ! -f "$dir/data/meta.properties" ]; then
    # Every node of one cluster must be formatted with the same id: derived from the
    # voters, so the three hosts agree without talking.
    local id
    id=$(python3 -c 'import base64, hashlib, sys
print(base64.urlsafe_b64encode(hashlib.sha256(sys.argv[1].encode()).digest()[:16]).decode().rstrip("="))' "$voters")
    "${java[@]}" kafka.tools.StorageTool format -t "$id" -c "$props" > "$dir/format.log" 2>&1
  fi
  exec "${java[@]}" kafka.Kafka "$props"
}

case "${1:-}" in
  classpath) classpath ;;
  start) shift; start "$@" ;;
  *) sed -n '2,19p' "$0" >&2; exit 2 ;;
esac
