#!/bin/bash
# Prints, once a second, what one block device did in that second: writes and the
# milliseconds they took, discards and their milliseconds, flushes and theirs
# (/proc/diskstats). Run beside a soak to tell a disk stall from a broker stall:
#   bash tuning/diskstats.sh vda > target/disk.log &
set -euo pipefail
dev=${1:?usage: diskstats.sh DEVICE (e.g. vda, as in /proc/diskstats)}
prev=""
while true; do
  now=$(awk -v d="$dev" '$3 == d { print $8, $11, $15, $18, $19, $20 }' /proc/diskstats)
  [ -n "$now" ] || { echo "no device $dev in /proc/diskstats" >&2; exit 1; }
  if [ -n "$prev" ]; then
    read -r w wt d dt f ft <<< "$prev"
    read -r w2 wt2 d2 dt2 f2 ft2 <<< "$now"
    echo "$(date -u +%H:%M:%S) writes=$((w2 - w)) write_ms=$((wt2 - wt)) discards=$((d2 - d)) discard_ms=$((dt2 - dt)) flushes=$((f2 - f)) flush_ms=$((ft2 - ft))"
  fi
  prev=$now
  sleep 1
done
