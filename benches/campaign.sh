#!/usr/bin/env bash
# The long fault campaign (issue 34): three weir hosts in network namespaces, Kafka's
# VerifiableProducer (idempotent, acks=all, 300 msg/s) and a VerifiableConsumer group of
# two plus confluent-kafka's producer and committing consumer, while a seeded nemesis
# mixes kill -9, SIGSTOP, cut links (a leader's, the controller's), rolling restarts, a
# full and a slow disk for WEIR_CAMPAIGN_MINUTES (default 30). The checker
# (tests/campaign/checker.rs) then holds every acknowledgement against the final log.
# Writes target/campaign/mixed/: history.jsonl (the faults, the seed first),
# the clients' output, every host's log, figures.txt and timeline.svg (acknowledgements
# a second per partition, the faults shaded).
#
#   bash benches/campaign.sh
#   WEIR_CAMPAIGN_MINUTES=5 WEIR_SEED=1234 bash benches/campaign.sh   # replay a seed
#
# Needs root (namespaces, a loop mount, the blkio cgroup) and what `bash
# tests/run-all.sh` installs (the JVM tools in target/jvm, the Python clients).
set -euo pipefail
cd "$(dirname "$0")/.."
export WEIR_CAMPAIGN_MINUTES=${WEIR_CAMPAIGN_MINUTES:-30}
cargo test --release --test campaign -- --ignored --nocapture \
  mixed_faults_for_half_an_hour_lose_nothing_acknowledged
python3 benches/campaign_plot.py target/campaign/mixed
cat target/campaign/mixed/figures.txt
