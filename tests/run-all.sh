#!/usr/bin/env bash
# Runs every test weir has, installing what the tests need first; `.ci/run` runs
# exactly this on a fresh machine. Lints are part of the build: formatting and clippy
# warnings fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."

# The disk-full test mounts a small ext4 image through a loop device; the interop tests
# drive the broker with kcat (librdkafka); the metrics test checks the exposition with
# promtool (Debian's prometheus package); the network-partition test puts hosts in
# network namespaces with iproute2's `ip netns`; the JVM interop tests build Kafka's
# Java client, tools, Streams and Connect with Maven on a JDK 17, the Go tests franz-go
# and sarama with Go (its go.mod names the toolchain, which Go fetches if older).
need=()
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v mount >/dev/null || need+=(mount)
command -v kcat >/dev/null || need+=(kcat)
command -v promtool >/dev/null || need+=(prometheus)
command -v ip >/dev/null || need+=(iproute2)
command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
command -v go >/dev/null || need+=(golang-go)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# The test clients are fetched and compiled in the background while cargo builds: on a
# fresh machine their downloads (pip, Maven Central, the Go proxy) are network-bound and
# the Rust build CPU-bound, so side by side they take the longer of the two, not the sum.
# Its output goes to target/prepare-clients.log, printed if it fails.
prepare_clients() {
  set -euo pipefail
  # Python Kafka clients for the interop tests, pinned, in a virtualenv under target/.
  if [ ! -x target/pyenv/bin/python ]; then
    python3 -m venv target/pyenv
  fi
  target/pyenv/bin/pip install --quiet --disable-pip-version-check \
    kafka-python==3.0.12 confluent-kafka==2.16.1 prometheus-client==0.21.1

  # Kafka's JVM clients and tools at pinned versions (tests/jvm/pom.xml), compiled into
  # target/jvm with Maven's repository under target/m2: the first run downloads them, a
  # second one nothing.
  mvn -B -q -Dmaven.repo.local=target/m2 -f tests/jvm/pom.xml compile
  # The jars resolved are the committed list: a change of a pinned version shows here.
  tr ':' '\n' <target/jvm/classpath.txt | xargs -n1 basename | sort |
    diff -u tests/jvm/dependencies.txt - ||
    { echo "tests/jvm resolved other jars than tests/jvm/dependencies.txt lists" >&2; exit 1; }
  # Apache Kafka 4.4.0 itself, the benchmarks' reference peer (benches/peers), into the same
  # cache; tests/peer_kafka.rs starts it once so its harness cannot rot.
  bash benches/peers/kafka.sh classpath > /dev/null

  # The Go clients (franz-go, sarama) at the versions tests/go/go.sum pins, with the module
  # cache under target/, compiled once into target/go for tests/go_clients.rs.
  export GOMODCACHE="$PWD/target/gomod" GOCACHE="$PWD/target/gocache" GOFLAGS=-mod=readonly
  (cd tests/go && go vet ./... && go test -c -o ../../target/go/gocompat.test .)
}
mkdir -p target
prepare_clients > target/prepare-clients.log 2>&1 &
clients=$!

cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# Benches run once each in test mode, so they cannot rot.
cargo test --benches
# tests/loadgen.rs drives the loadgen binary.
cargo build -p loadgen
if ! wait "$clients"; then
  cat target/prepare-clients.log >&2
  echo "preparing the test clients failed (target/prepare-clients.log)" >&2
  exit 1
fi
cat target/prepare-clients.log
cargo test --workspace --lib --tests
