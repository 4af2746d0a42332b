#!/usr/bin/env bash
# Runs the storage engine's benchmarks and prints their figures as a Markdown table,
# with durable append throughput as a ratio of fio's O_DIRECT sequential write
# bandwidth measured on the same disk in the same run.
#
#   bash benches/storage.sh            # all benches
#   WEIR_BENCH_CPU=1 bash benches/storage.sh   # pin the bench's executor to core 1
#
# Run it on an idle machine: a compile beside it ruins the figures.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v fio >/dev/null; then
  apt-get update -qq && apt-get install -y -qq fio >/dev/null
fi

cargo build --release --benches --quiet
data=target/bench-data
mkdir -p "$data"

fio_gbps() {
  fio --name=seqwrite --directory="$data" --direct=1 --rw=write --bs=64k --iodepth=8 \
      --ioengine=io_uring --size=4G --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e9)'
  rm -f "$data"/seqwrite*
}

before=$(fio_gbps)
cargo bench --quiet --bench append_path -- --warm-up-time 1 --measurement-time 3 >/dev/null
cargo bench --quiet --bench durable_append >/dev/null
after=$(fio_gbps)

python3 - "$before" "$after" <<'PY'
import json, pathlib, sys
before, after = float(sys.argv[1]), float(sys.argv[2])
fio = (before + after) / 2
root = pathlib.Path("target/criterion")
def load(directory):
    d = root / directory / "new"
    est = json.loads((d / "estimates.json").read_text())
    bench = json.loads((d / "benchmark.json").read_text())
    ns = est["mean"]["point_estimate"]
    size = (bench.get("throughput") or {}).get("Bytes")
    return ns, (size / ns if size else None)  # GB/s = bytes/ns

print(f"fio O_DIRECT sequential write (64 KiB, QD8, io_uring): {before:.2f} GB/s before, {after:.2f} GB/s after, mean {fio:.2f} GB/s\n")
print("| bench | time per op | throughput | ratio |")
print("|---|---|---|---|")
for size in (1024, 16384):
    crc, _ = load(f"append_path/crc32c_only/{size}")
    for name in ("crc32c_only", "validate", "validate_index_copy"):
        ns, gbps = load(f"append_path/{name}/{size}")
        print(f"| {name} {size // 1024} KiB batch | {ns:.0f} ns | {gbps:.1f} GB/s | {ns / crc:.2f}x CRC |")
ns, _ = load("segment_index_lookup_1M_entries")
print(f"| index lookup, 1M entries | {ns:.0f} ns | | |")
for d in sorted((root / "durable_append_16k").glob("*/*/new")):
    rel = d.parent.relative_to(root)
    ns, gbps = load(rel)
    print(f"| durable append 16 KiB, {rel.parent.name.replace('_interval', ', interval')} {rel.name} | {ns / 1000:.1f} us | {gbps:.2f} GB/s | {gbps / fio:.2f}x fio |")
ns, gbps = load("tail_read/cached_1MiB")
print(f"| cached tail read, 1 MiB | {ns / 1000:.1f} us | {gbps:.1f} GB/s | |")
PY
