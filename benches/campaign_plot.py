"""Draws a fault campaign's timeline (standard library only): acknowledgements a second
per partition of the checked topic from VerifiableProducer's output, with each fault of
history.jsonl shaded from its start to its heal and named.
  campaign_plot.py DIR    (reads DIR/producer.jsonl and DIR/history.jsonl, writes
                           DIR/timeline.svg)"""
import json
import sys
from collections import defaultdict

out_dir = sys.argv[1]
history = [json.loads(line) for line in open(f"{out_dir}/history.jsonl")]
start = history[0]["start_ms"]
faults = history[1:]
rate = defaultdict(lambda: defaultdict(int))
for line in open(f"{out_dir}/producer.jsonl"):
    if '"producer_send_success"' not in line:
        continue
    e = json.loads(line)
    rate[e["partition"]][(e["timestamp"] - start) // 1000] += 1
end_s = max((max(r) for r in rate.values()), default=1) + 1
top = max((max(r.values()) for r in rate.values()), default=1)
W, H, L, B = 1200, 420, 50, 40
x = lambda s: L + (W - L - 10) * s / end_s
y = lambda v: H - B - (H - B - 20) * v / top
parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>']
shade = {"kill": "#f4cccc", "pause": "#fce5cd", "cut-leader": "#d9d2e9", "cut-controller": "#cfe2f3",
         "rolling-restart": "#d9ead3", "full-disk": "#fff2cc", "slow-disk": "#ead1dc"}
for n, f in enumerate(faults):
    a, b = (f["start_ms"] - start) / 1000, (f["heal_ms"] - start) / 1000
    parts.append(f'<rect x="{x(a):.1f}" y="20" width="{max(x(b) - x(a), 1):.1f}" height="{H - B - 20}" '
                 f'fill="{shade.get(f["fault"], "#eeeeee")}"><title>{f["fault"]} host {f["host"]}</title></rect>')
    parts.append(f'<text x="{x(a):.1f}" y="{14 + 10 * (n % 2)}" font-size="9">{f["fault"]}</text>')
colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
for p in sorted(rate):
    points = " ".join(f"{x(s):.1f},{y(rate[p].get(s, 0)):.1f}" for s in range(end_s))
    parts.append(f'<polyline fill="none" stroke="{colors[p % 4]}" stroke-width="1" points="{points}"/>')
    parts.append(f'<text x="{W - 120}" y="{40 + 14 * p}" fill="{colors[p % 4]}">partition {p}</text>')
parts.append(f'<line x1="{L}" y1="{H - B}" x2="{W - 10}" y2="{H - B}" stroke="black"/>')
parts.append(f'<line x1="{L}" y1="20" x2="{L}" y2="{H - B}" stroke="black"/>')
for t in range(0, end_s, max(end_s // 10, 1)):
    parts.append(f'<text x="{x(t):.1f}" y="{H - B + 14}" text-anchor="middle">{t}s</text>')
for v in (0, top // 2, top):
    parts.append(f'<text x="{L - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v}</text>')
parts.append(f'<text x="{L}" y="{H - 6}">acknowledged records a second per partition (VerifiableProducer, '
             f'acks=all); shaded: faults from injection to heal</text></svg>')
open(f"{out_dir}/timeline.svg", "w").write("\n".join(parts))
print(f"{out_dir}/timeline.svg")
