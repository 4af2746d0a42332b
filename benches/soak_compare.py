"""Puts soak runs side by side: each second's end-to-end p99.9 of every run, one panel per
run, on a log scale, with the seconds near a device stall shaded and the soak's 3x line
(three times the run's median one-second p99.9).

Usage: python3 benches/soak_compare.py OUT.svg LABEL=RUN_DIR [LABEL=RUN_DIR ...]
Each RUN_DIR is a `tests/soak.rs` output directory (`WEIR_SOAK_OUT`): its `seconds.csv`
and `soak.json` are read. Writes the SVG (and a PNG beside it when rsvg-convert is
installed) and prints one line per run: median and worst p99.9, their ratio, how many
seconds were above 3x the median and how many of those lay away from device stalls.
"""
import csv, json, math, os, shutil, subprocess, sys

WIDTH, PANEL, TOP, LEFT, RIGHT = 920, 170, 30, 60, 20
Y_MIN_MS, Y_MAX_MS = 1.0, 5000.0


def y_of(ms, top):
    ms = min(max(ms, Y_MIN_MS), Y_MAX_MS)
    share = math.log10(ms / Y_MIN_MS) / math.log10(Y_MAX_MS / Y_MIN_MS)
    return top + PANEL - 30 - share * (PANEL - 50)


def panel(label, run_dir, top):
    with open(os.path.join(run_dir, "seconds.csv")) as f:
        rows = [(float(r["second"]), float(r["e2e_p999_ms"]), r["near_device_stall"] == "1")
                for r in csv.DictReader(f)]
    with open(os.path.join(run_dir, "soak.json")) as f:
        soak = json.load(f)
    median = soak["e2e_p999_ms_one_second_median"]
    worst = soak["e2e_p999_ms_one_second_worst"]
    over = [near for _, ms, near in rows if ms > 3 * median]
    summary = (f"{label}: median {median:.2f} ms, worst {worst:.0f} ms "
               f"({worst / median:.0f}x); {len(over)} s above 3x, "
               f"{over.count(False)} away from the {soak['device_stalls']} device stalls; "
               f"{soak['seconds_behind_schedule']} s behind schedule")
    end = max(s for s, _, _ in rows) + 1
    x_of = lambda s: LEFT + s / end * (WIDTH - LEFT - RIGHT)
    out = [f'<text x="{LEFT}" y="{top + 14}" font-size="13">{summary}</text>']
    step = (WIDTH - LEFT - RIGHT) / end
    for s, _, near in rows:
        if near:
            out.append(f'<rect x="{x_of(s):.1f}" y="{top + 20}" width="{step:.2f}" '
                       f'height="{PANEL - 50}" fill="#ddd"/>')
    for ms in (1, 10, 100, 1000):
        y = y_of(ms, top)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#eee"/><text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="10" '
                   f'text-anchor="end">{ms} ms</text>')
    y3 = y_of(3 * median, top)
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y3:.1f}" y2="{y3:.1f}" '
               f'stroke="#d62728" stroke-dasharray="4 3"/>')
    points = " ".join(f"{x_of(s):.1f},{y_of(ms, top):.1f}" for s, ms, _ in rows)
    out.append(f'<polyline points="{points}" fill="none" stroke="#1f77b4"/>')
    for s in range(0, int(end) + 1, 60):
        out.append(f'<text x="{x_of(s):.1f}" y="{top + PANEL - 14}" font-size="10" '
                   f'text-anchor="middle">{s} s</text>')
    return out, summary


def main():
    out_path, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    height = TOP + PANEL * len(runs) + 10
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="{LEFT}" y="18" font-size="14">one-second e2e p99.9 (log scale); '
           'grey: within a second of a device stall; dashed: 3x the median</text>']
    for i, (label, run_dir) in enumerate(runs):
        lines, summary = panel(label, run_dir, TOP + i * PANEL)
        svg.extend(lines)
        print(summary)
    svg.append("</svg>\n")
    with open(out_path, "w") as f:
        f.write("\n".join(svg))
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", out_path, "-o", os.path.splitext(out_path)[0] + ".png"],
                       check=False)


if __name__ == "__main__":
    main()
