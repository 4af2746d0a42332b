//! `loadgen compare`: runs side by side — a table of throughput and latency percentiles
//! with ratios to the first run, and an SVG plot of the percentile distributions with
//! HdrHistogram's log-scaled percentile axis.

use std::{fmt::Write as _, path::PathBuf};

use clap::Args;

use crate::results::{read_percentile_distribution, DistributionPoint, Summary};

/// Options of `loadgen compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Run directories (each holds summary.json and <metric>.hgrm); the first is the
    /// reference for ratios.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// The latency compared: produce, e2e or fetch.
    #[arg(long, default_value = "produce")]
    pub metric: String,
    /// Where to write the plot (SVG; a PNG beside it too when `rsvg-convert` is installed).
    #[arg(long, default_value = "comparison.svg")]
    pub plot: PathBuf,
    /// Print the table as Markdown.
    #[arg(long)]
    pub markdown: bool,
}

/// One run as compared.
struct Run {
    summary: Summary,
    curve: Vec<DistributionPoint>,
}

/// Prints the table and writes the plot.
pub fn compare(args: &CompareArgs) -> Result<(), String> {
    let mut runs = Vec::new();
    for dir in &args.runs {
        let summary = Summary::read(dir)?;
        let path = dir.join(format!("{}.hgrm", args.metric));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let curve =
            read_percentile_distribution(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        runs.push(Run { summary, curve });
    }
    print!("{}", table(&runs, &args.metric, args.markdown));
    let title = format!("{} latency by percentile", args.metric);
    std::fs::write(&args.plot, plot(&runs, &title))
        .map_err(|e| format!("{}: {e}", args.plot.display()))?;
    println!("plot: {}", args.plot.display());
    let png = args.plot.with_extension("png");
    match std::process::Command::new("rsvg-convert")
        .arg(&args.plot)
        .arg("-o")
        .arg(&png)
        .status()
    {
        Ok(status) if status.success() => println!("plot: {}", png.display()),
        Ok(status) => eprintln!("rsvg-convert failed ({status}); the SVG is complete"),
        Err(_) => eprintln!("no PNG: rsvg-convert is not installed (apt-get install librsvg2-bin)"),
    }
    Ok(())
}

fn table(runs: &[Run], metric: &str, markdown: bool) -> String {
    let mut header = vec!["run".to_string(), "msgs/s".to_string()];
    let columns = ["p50", "p90", "p99", "p99.9", "p99.99", "max"];
    header.extend(columns.iter().map(|c| format!("{c} ms")));
    header.push("errors".into());
    let reference = runs.first();
    let ratio = |value: f64, base: Option<f64>| match base {
        Some(base) if base > 0.0 => format!("{value:.3} ({:.2}x)", value / base),
        _ => format!("{value:.3}"),
    };
    let mut rows = Vec::new();
    for run in runs {
        let s = &run.summary;
        let throughput = s
            .headline_throughput()
            .map_or(0.0, |t| t.messages_per_second);
        let base_throughput = reference
            .and_then(|r| r.summary.headline_throughput())
            .map(|t| t.messages_per_second);
        let mut row = vec![
            s.label.clone(),
            match base_throughput {
                Some(base) if base > 0.0 => format!("{throughput:.0} ({:.2}x)", throughput / base),
                _ => format!("{throughput:.0}"),
            },
        ];
        let latency = s.latency_ms.get(metric);
        let base = reference.and_then(|r| r.summary.latency_ms.get(metric));
        for (i, _) in columns.iter().enumerate() {
            match latency {
                Some(l) => row.push(ratio(l.columns()[i].1, base.map(|b| b.columns()[i].1))),
                None => row.push("-".into()),
            }
        }
        row.push(s.errors.to_string());
        rows.push(row);
    }
    let mut out = String::new();
    if markdown {
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for row in rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
    } else {
        let widths: Vec<usize> = (0..header.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].len())
                    .chain([header[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in std::iter::once(&header).chain(rows.iter()) {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "{}", cells.join("  "));
        }
    }
    out
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 60.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Position of percentile `q` on HdrHistogram's axis: log10(1 / (1 - q)).
fn percentile_x(q: f64) -> f64 {
    (1.0 / (1.0 - q.min(0.999_999_9))).log10()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn plot(runs: &[Run], title: &str) -> String {
    let x_max = runs
        .iter()
        .flat_map(|r| {
            r.curve
                .iter()
                .filter(|p| p.1 < 1.0)
                .map(|p| percentile_x(p.1))
        })
        .fold(2.0f64, f64::max)
        .ceil();
    let y_top = runs
        .iter()
        .flat_map(|r| r.curve.iter().map(|p| p.0))
        .fold(0.001f64, f64::max);
    let y_step = nice_step(y_top / 5.0);
    let y_max = (y_top / y_step).ceil() * y_step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let sx = |x: f64| LEFT + x / x_max * plot_w;
    let sy = |y: f64| TOP + plot_h - y / y_max * plot_h;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    for i in 0..=(x_max as usize) {
        let x = sx(i as f64);
        let label = if i == 0 {
            "0%".to_string()
        } else {
            format!("{}%", 100.0 - 100.0 / 10f64.powi(i as i32))
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 18.0
        );
    }
    let mut y = 0.0;
    while y <= y_max + y_step / 2.0 {
        let py = sy(y);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            py + 4.0,
            trim_number(y)
        );
        y += y_step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 12.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">latency (ms)</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (i, run) in runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = run
            .curve
            .iter()
            .map(|&(value, q)| format!("{:.1},{:.1}", sx(percentile_x(q).min(x_max)), sy(value)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let ly = TOP + 16.0 + i as f64 * 18.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + 12.0,
            LEFT + 36.0,
            LEFT + 42.0,
            ly + 4.0,
            escape(&run.summary.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let power = 10f64.powf(raw.max(1e-9).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * power)
}

fn trim_number(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::LatencySummary;

    fn run(label: &str, scale: f64) -> Run {
        let latency = LatencySummary {
            count: 100,
            mean: scale,
            p50: scale,
            p90: 2.0 * scale,
            p99: 3.0 * scale,
            p99_9: 4.0 * scale,
            p99_99: 5.0 * scale,
            max: 6.0 * scale,
        };
        Run {
            summary: Summary {
                label: label.into(),
                command: "produce".into(),
                bootstrap: "x:1".into(),
                profile: None,
                options: serde_json::Value::Null,
                started_at_unix_s: 0.0,
                measured_seconds: 1.0,
                produce: Some(crate::results::Throughput {
                    messages: 1000,
                    messages_per_second: 1000.0 * scale,
                    megabytes_per_second: 1.0,
                }),
                consume: None,
                errors: 0,
                error_kinds: Default::default(),
                aborted: None,
                group: None,
                latency_ms: [("produce".to_string(), latency)].into(),
            },
            curve: vec![
                (scale, 0.0),
                (2.0 * scale, 0.9),
                (3.0 * scale, 0.99),
                (6.0 * scale, 1.0),
            ],
        }
    }

    #[test]
    fn table_gives_ratios_to_the_first_run() {
        let text = table(&[run("a", 1.0), run("b <2>", 2.0)], "produce", false);
        assert!(text.contains("2000 (2.00x)"), "{text}");
        assert!(text.contains("6.000 (2.00x)"), "{text}");
        let markdown = table(&[run("a", 1.0)], "produce", true);
        assert!(markdown.starts_with("| run | msgs/s |"), "{markdown}");
    }

    #[test]
    fn plot_has_one_labelled_curve_per_run() {
        let svg = plot(&[run("a", 1.0), run("b <2>", 2.0)], "t");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("b &lt;2&gt;"));
        assert!(svg.contains(">99%<") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn steps_are_round_numbers() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(1.0), 1.0);
    }
}
