"""Drives a running weir with a load that steps up and down, and plots what the adaptive
group commit did: the produce rate, the commit interval each second, and the produce
p99 each second.

Usage: step_load.py LOADGEN BOOTSTRAP METRICS_URL MAX_RATE OUT_DIR SVG
Each step is one loadgen run (one partition, 1 KiB messages, acks=all, pinned to core 0)
at a fraction of MAX_RATE (1.0 runs open-throttle); loadgen prints one progress line per
second (rate, p50, p99), and a thread reads the broker's flush_interval_microseconds
gauge every 200 ms. Writes OUT_DIR/steps.json and the SVG.
"""
import json, re, subprocess, sys, threading, time, urllib.request

loadgen, bootstrap, metrics_url, max_rate, out_dir, svg_path = sys.argv[1:7]
max_rate = float(max_rate)
STEPS = [0.1, 0.3, 0.6, 0.9, 1.0, 0.6, 0.3, 0.1]
STEP_SECONDS = 8

samples = []  # (t, interval_us)
stop = threading.Event()
t0 = time.monotonic()


def sampler():
    while not stop.is_set():
        try:
            text = urllib.request.urlopen(metrics_url, timeout=1).read().decode()
            m = re.search(r"^weir_flush_interval_seconds\{[^}]*\} (\S+)$", text, re.M)
            if m:
                samples.append((time.monotonic() - t0, float(m.group(1)) * 1e6))
        except OSError:
            pass
        stop.wait(0.2)


threading.Thread(target=sampler, daemon=True).start()
seconds = []  # (t, msgs/s, p99 ms, target rate)
line = re.compile(r"produced\s+(\d+) msg/s.*produce p50 ([\d.]+) p99 ([\d.]+) ms")
for i, fraction in enumerate(STEPS):
    args = [loadgen, "produce", "--bootstrap", bootstrap, "--cores", "0", "--topic", "steps",
            "--partitions", "1", "--message-size", "1024", "--acks", "all",
            "--batch-bytes", "262144", "--duration", f"{STEP_SECONDS}s",
            "--out", f"{out_dir}/step-{i}"]
    if fraction < 1.0:
        args += ["--rate", str(int(max_rate * fraction))]
    start = time.monotonic() - t0
    run = subprocess.run(args, capture_output=True, text=True)
    n = 0
    for l in run.stderr.splitlines():
        m = line.search(l)
        # The line after the last whole second covers only the run's tail.
        if m and n < STEP_SECONDS:
            n += 1
            seconds.append((start + n, float(m.group(1)), float(m.group(3)), max_rate * fraction))
stop.set()
json.dump({"seconds": seconds, "interval_samples": samples, "steps": STEPS,
           "max_rate": max_rate}, open(f"{out_dir}/steps.json", "w"), indent=1)

# Three panels sharing the time axis.
W, H, LEFT, TOP, GAP = 900, 170, 80, 40, 60
end = max([s[0] for s in seconds] + [s[0] for s in samples] + [1])
parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W + 210}" height="{TOP + 3 * (H + GAP)}" '
         f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>']


def panel(k, title, series, unit, floor=1e-9):
    """Panel k; its axis reaches at least `floor`, so a flat series still reads."""
    top = TOP + k * (H + GAP)
    ymax = max([y for _, pts, _ in series for _, y in pts] + [floor]) * 1.1
    parts.append(f'<text x="{LEFT}" y="{top - 10}" font-size="15">{title}</text>'
                 f'<rect x="{LEFT}" y="{top}" width="{W}" height="{H}" fill="none" stroke="#999"/>')
    for t in range(5):
        y = top + H - H * t / 4
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4}" font-size="11" text-anchor="end">'
                     f'{ymax * t / 4:,.{0 if ymax > 100 else 2}f}</text>')
    for t in range(0, int(end) + 1, 5):
        x = LEFT + W * t / end
        parts.append(f'<text x="{x}" y="{top + H + 14}" font-size="11" text-anchor="middle">{t}s</text>')
    for j, (label, pts, colour) in enumerate(series):
        path = " ".join(f"{LEFT + W * x / end:.1f},{top + H - H * y / ymax:.1f}" for x, y in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        parts.append(f'<text x="{LEFT + W + 8}" y="{top + 16 + 16 * j}" font-size="12" fill="{colour}">{label}</text>')
    parts.append(f'<text x="{LEFT + W + 8}" y="{top + H}" font-size="11">{unit}</text>')


panel(0, "produce rate per second (offered: steps of the measured maximum)",
      [("achieved", [(t, r) for t, r, _, _ in seconds], "#1f77b4"),
       ("offered", [(t, o) for t, _, _, o in seconds], "#aaaaaa")], "msgs/s")
# The interval's axis spans at least the controller's bound with the default target
# (2 ms / 2), so an interval held at zero reads as zero, not as an unlabelled axis.
panel(1, "commit interval chosen by the adaptive group commit (bound: 1,000 µs)",
      [("interval", samples, "#ff7f0e")], "µs", floor=1000 / 1.1)
panel(2, "produce p99 per second (acks=all, from the scheduled send time)",
      [("p99", [(t, p) for t, _, p, _ in seconds], "#d62728")], "ms")
parts.append("</svg>")
open(svg_path, "w").write("".join(parts))
print(f"wrote {svg_path}")
