"""Markdown tables of benches/peers/compare.sh's rows: each system's median with every
run beside it, and weir ÷ Kafka ratios per run (runs pair by their round).

Usage: tables.py ROWS.jsonl"""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
systems = ["weir-durable", "weir-write-only", "kafka-default", "kafka-durable"]


def values(system, workload, key):
    """Every run's value of `key`, in run order."""
    return [r[key] for r in sorted(rows, key=lambda r: r["run"])
            if r["system"] == system and r["workload"] == workload]


def cell(vals, fmt):
    if not vals:
        return "–"
    runs = ", ".join(fmt(v) for v in vals)
    return f"{fmt(statistics.median(vals))} ({runs})"


def ratio(a, b):
    """Per-run ratios a/b and their median."""
    rs = [x / y for x, y in zip(a, b) if y]
    return cell(rs, lambda v: f"{v:.2f}")


msgs = lambda v: f"{v:,.0f}"
print("### Throughput, msgs/s (1 KiB, acks=all): median (each run)\n")
print("| workload | " + " | ".join(systems) + " | weir durable ÷ Kafka default | weir durable ÷ Kafka durable |")
print("|---|" + "---|" * (len(systems) + 2))
for w in ("throughput-p1", "throughput-p8", "throughput-p100"):
    v = {s: values(s, w, "msgs_per_s") for s in systems}
    print(f"| {w.split('-')[1].replace('p', '')} partition(s) | " + " | ".join(cell(v[s], msgs) for s in systems)
          + f" | {ratio(v['weir-durable'], v['kafka-default'])} | {ratio(v['weir-durable'], v['kafka-durable'])} |")

mib = lambda v: f"{v / 1024:,.0f}"
print("\n### Resident memory, MiB: median (each run)\n")
print("| when | " + " | ".join(systems) + " | weir durable ÷ Kafka default |")
print("|---|" + "---|" * (len(systems) + 1))
for w, label in (("rss-idle", "idle, 5 s after start"), ("rss-load", "peak during the 8-partition run")):
    v = {s: values(s, w, "rss_kib") for s in systems}
    print(f"| {label} | " + " | ".join(cell(v[s], mib) for s in systems)
          + f" | {ratio(v['weir-durable'], v['kafka-default'])} |")

lat = [r for r in rows if r["workload"] == "latency-50"]
if lat:
    ms = lambda v: f"{v:.2f}" if v < 10 else f"{v:.0f}"
    print(f"\n### Latency at a fixed {lat[0]['rate']:,} msgs/s (8 partitions), ms: median (each run)\n")
    for metric in ("produce", "e2e"):
        print(f"\n{metric}:\n")
        print("| percentile | " + " | ".join(systems) + " | weir durable ÷ Kafka default |")
        print("|---|" + "---|" * (len(systems) + 1))
        for p in ("p50", "p99", "p99_9", "max"):
            v = {s: [r[metric][p] for r in sorted(lat, key=lambda r: r["run"]) if r["system"] == s] for s in systems}
            print(f"| {p.replace('_', '.')} | " + " | ".join(cell(v[s], ms) for s in systems)
                  + f" | {ratio(v['weir-durable'], v['kafka-default'])} |")
