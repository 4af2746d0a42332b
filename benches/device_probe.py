"""Does the data device stall by itself? A light probe of the disk under a directory,
without weir: one 4 KiB O_DIRECT write and an fdatasync every PERIOD_MS, for SECONDS.

Usage: python3 benches/device_probe.py DIR [SECONDS=600] [PERIOD_MS=10]
Writes its file (64 MiB, preallocated, overwritten in a ring) in DIR and removes it.
Prints JSON: the probe's latency percentiles (one write + fdatasync, ms), its stalls
(probes of 100 ms or more, at which second and how long: the soak's device-stall
threshold), and the one-second p99.9 median and worst, as `tests/soak.rs` reports them
for weir, so a soak's ratio can be read beside the device's own. Run it on an idle
machine, or beside a load to watch that load's effect on the device.
"""
import json, mmap, os, sys, time

STALL_MS = 100.0
FILE_BYTES = 64 << 20
PAGE = 4096


def percentile(sorted_ms, q):
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * q))]


def main():
    directory = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 600.0
    period = (float(sys.argv[3]) if len(sys.argv) > 3 else 10.0) / 1000.0
    path = os.path.join(directory, f"device-probe-{os.getpid()}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
    try:
        os.posix_fallocate(fd, 0, FILE_BYTES)
        os.fsync(fd)
        page = mmap.mmap(-1, PAGE)  # page-aligned, as O_DIRECT needs
        page.write(b"w" * PAGE)
        probes = []  # (second, ms)
        offset = 0
        start = time.monotonic()
        due = start
        while time.monotonic() - start < seconds:
            t0 = time.monotonic()
            os.pwritev(fd, [page], offset)
            os.fdatasync(fd)
            probes.append((int(t0 - start), (time.monotonic() - t0) * 1000.0))
            offset = (offset + PAGE) % FILE_BYTES
            due += period
            time.sleep(max(0.0, due - time.monotonic()))
    finally:
        os.close(fd)
        os.unlink(path)
    all_ms = sorted(ms for _, ms in probes)
    by_second = {}
    for second, ms in probes:
        by_second.setdefault(second, []).append(ms)
    p999s = sorted(percentile(sorted(v), 0.999) for v in by_second.values())
    print(json.dumps({
        "directory": directory,
        "seconds": seconds,
        "probes": len(probes),
        "ms": {q: round(percentile(all_ms, p), 3) for q, p in
               (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))},
        "stalls_s_and_ms": [[s, round(ms, 1)] for s, ms in probes if ms >= STALL_MS],
        "one_second_p999_ms_median": round(p999s[len(p999s) // 2], 3),
        "one_second_p999_ms_worst": round(p999s[-1], 3),
    }, indent=2))


if __name__ == "__main__":
    main()
