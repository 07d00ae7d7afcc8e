//! The picture of a run, hand-written SVG in the style of `examples/compare`'s: per second, the
//! p50 and p99 latency of sends and of inbox page reads (log scale, by when the call was made),
//! and below it the calls completed and the errors per second, with the outage shaded.

use std::fmt::Write as _;

use crate::report::percentile;
use crate::run::{Op, Outcome};

const LEFT: f64 = 80.0;
const WIDTH: f64 = 760.0;
const TOP: f64 = 100.0;
const LATENCY_H: f64 = 300.0;
const GAP: f64 = 80.0;
const RATE_H: f64 = 180.0;
const LEGEND_W: f64 = 220.0;

/// A line of the latency panel.
struct Series {
    name: &'static str,
    colour: &'static str,
    dash: &'static str,
    ops: &'static [Op],
    p: f64,
}

const SERIES: [Series; 4] = [
    Series {
        name: "send p50",
        colour: "#1f77b4",
        dash: "",
        ops: &[Op::Send],
        p: 0.50,
    },
    Series {
        name: "send p99",
        colour: "#1f77b4",
        dash: "6,4",
        ops: &[Op::Send],
        p: 0.99,
    },
    Series {
        name: "inbox page p50",
        colour: "#2ca02c",
        dash: "",
        ops: &[Op::Page, Op::NextPage],
        p: 0.50,
    },
    Series {
        name: "inbox page p99",
        colour: "#2ca02c",
        dash: "6,4",
        ops: &[Op::Page, Op::NextPage],
        p: 0.99,
    },
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` in lines of at most about `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::replace(&mut line, format!("  {word}")));
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines.push(line);
    lines
}

/// Ticks at powers of ten from `lo` to `hi` (log10 positions, labels).
fn log_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    let bottom = lo.max(1e-3).log10().floor() as i32;
    let top = (hi.max(lo * 10.0).log10().ceil() as i32).max(bottom + 1);
    (bottom..=top)
        .map(|e| {
            let value = 10f64.powi(e);
            let label = if e < 0 {
                format!("{value}")
            } else {
                format!("{value:.0}")
            };
            (f64::from(e), label)
        })
        .collect()
}

/// About five round ticks from 0 to at least `hi`.
fn linear_ticks(hi: f64) -> Vec<f64> {
    let hi = hi.max(1.0);
    let raw = hi / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(magnitude * 10.0);
    let n = (hi / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// Broken polylines through `points` (`None` breaks the line).
fn polylines(
    out: &mut String,
    points: &[Option<(f64, f64)>],
    colour: &str,
    dash: &str,
    title: &str,
) {
    for run in points.split(Option::is_none) {
        let coords: Vec<String> = run
            .iter()
            .flatten()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        if coords.is_empty() {
            continue;
        }
        if coords.len() == 1 {
            let (x, y) = run[0].unwrap_or_default();
            let _ = writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="2" fill="{colour}"><title>{title}</title></circle>"#
            );
            continue;
        }
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.8" stroke-dasharray="{dash}"><title>{title}</title></polyline>"#,
            coords.join(" ")
        );
    }
}

/// The chart of `outcome`, under the lines of `title` (the server, the settings).
pub fn render(outcome: &Outcome, title: &[String]) -> String {
    let seconds = outcome
        .drained
        .as_secs_f64()
        .max(outcome.duration.as_secs_f64());
    let buckets = seconds.ceil().max(1.0) as usize;
    let px = |t: f64| LEFT + t / buckets as f64 * WIDTH;

    // Latencies (ms) of each series, per second the call was made in.
    let mut per_second: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); buckets]; SERIES.len()];
    let mut completed = vec![0usize; buckets];
    let mut failed = vec![0usize; buckets];
    for sample in &outcome.samples {
        let started = (sample.start.as_secs_f64() as usize).min(buckets - 1);
        for (i, series) in SERIES.iter().enumerate() {
            if series.ops.contains(&sample.op) {
                per_second[i][started].push(sample.latency.as_secs_f64() * 1000.0);
            }
        }
        let done = ((sample.start + sample.latency).as_secs_f64() as usize).min(buckets - 1);
        completed[done] += 1;
        if sample.error.is_some() {
            failed[done] += 1;
        }
    }
    let values: Vec<Vec<Option<f64>>> = per_second
        .into_iter()
        .zip(&SERIES)
        .map(|(seconds, series)| {
            seconds
                .into_iter()
                .map(|mut latencies| {
                    latencies.sort_by(f64::total_cmp);
                    let value = percentile(&latencies, series.p);
                    (value.is_finite() && value > 0.0).then_some(value)
                })
                .collect()
        })
        .collect();
    let all: Vec<f64> = values.iter().flatten().flatten().copied().collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(1.0, f64::max);
    let y_ticks = log_ticks(if lo.is_finite() { lo } else { 1.0 }, hi);
    let (y0, y1) = (y_ticks[0].0, y_ticks[y_ticks.len() - 1].0);
    let py = |ms: f64| TOP + LATENCY_H - (ms.log10() - y0) / (y1 - y0) * LATENCY_H;

    let rate_top = TOP + LATENCY_H + GAP;
    let rate_max = completed.iter().copied().max().unwrap_or(0) as f64;
    let rate_ticks = linear_ticks(rate_max);
    let rate_hi = rate_ticks.last().copied().unwrap_or(1.0);
    let pr = |rate: f64| rate_top + RATE_H - rate / rate_hi * RATE_H;

    let width = LEFT + WIDTH + LEGEND_W;
    let height = rate_top + RATE_H + 60.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">"#
    );
    out.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let lines: Vec<String> = title.iter().flat_map(|line| wrap(line, 135)).collect();
    for (i, line) in lines.iter().take(4).enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" font-size="12">{}</text>"#,
            18 + 16 * i,
            escape(line)
        );
    }

    // The outage, shaded in both panels.
    if let Some(outage) = outcome.outage {
        let (x0, x1) = (px(outage.start.as_secs_f64()), px(outage.end.as_secs_f64()));
        for (top, h) in [(TOP, LATENCY_H), (rate_top, RATE_H)] {
            let _ = writeln!(
                out,
                r##"<rect x="{x0:.1}" y="{top}" width="{:.1}" height="{h}" fill="#d62728" fill-opacity="0.12"/>"##,
                (x1 - x0).max(1.0)
            );
        }
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{}" font-size="11" fill="#d62728" text-anchor="middle">outage ({:.1} s)</text>"##,
            (x0 + x1) / 2.0,
            TOP + 14.0,
            outage.end.saturating_sub(outage.start).as_secs_f64()
        );
    }

    // Time ticks, shared by both panels.
    let step = linear_ticks(buckets as f64);
    for t in step.iter().filter(|t| **t <= buckets as f64) {
        let x = px(*t);
        for (top, h) in [(TOP, LATENCY_H), (rate_top, RATE_H)] {
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{}" stroke="#eee"/><text x="{x:.1}" y="{}" font-size="11" text-anchor="middle">{t}</text>"##,
                top + h,
                top + h + 15.0
            );
        }
    }
    if outcome.drained > outcome.duration {
        // The deadline: calls after it are those in flight when it passed.
        let x = px(outcome.duration.as_secs_f64());
        for (top, h) in [(TOP, LATENCY_H), (rate_top, RATE_H)] {
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{}" stroke="#999" stroke-dasharray="3,3"/>"##,
                top + h
            );
        }
    }

    // Latency panel.
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold" text-anchor="middle">Latency per second (by when the call was made)</text>"#,
        LEFT + WIDTH / 2.0,
        TOP - 15.0
    );
    for (y, label) in &y_ticks {
        let at = TOP + LATENCY_H - (y - y0) / (y1 - y0) * LATENCY_H;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{at:.1}" x2="{}" y2="{at:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{label}</text>"##,
            LEFT + WIDTH,
            LEFT - 5.0,
            at + 4.0
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{WIDTH}" height="{LATENCY_H}" fill="none" stroke="#999"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{0}" y="{1}" font-size="12" text-anchor="middle" transform="rotate(-90 {0} {1})">latency (ms, log scale)</text>"#,
        LEFT - 55.0,
        TOP + LATENCY_H / 2.0
    );
    for (series, values) in SERIES.iter().zip(&values) {
        let points: Vec<Option<(f64, f64)>> = values
            .iter()
            .enumerate()
            .map(|(s, v)| v.map(|ms| (px(s as f64 + 0.5), py(ms))))
            .collect();
        polylines(&mut out, &points, series.colour, series.dash, series.name);
    }

    // Throughput panel.
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold" text-anchor="middle">Calls completed per second, and errors</text>"#,
        LEFT + WIDTH / 2.0,
        rate_top - 15.0
    );
    for tick in &rate_ticks {
        let at = pr(*tick);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{at:.1}" x2="{}" y2="{at:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{tick}</text>"##,
            LEFT + WIDTH,
            LEFT - 5.0,
            at + 4.0
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{rate_top}" width="{WIDTH}" height="{RATE_H}" fill="none" stroke="#999"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{0}" y="{1}" font-size="12" text-anchor="middle" transform="rotate(-90 {0} {1})">calls per second</text>"#,
        LEFT - 55.0,
        rate_top + RATE_H / 2.0
    );
    let bar = WIDTH / buckets as f64;
    for (s, &n) in failed.iter().enumerate().filter(|(_, n)| **n > 0) {
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#d62728"><title>{n} errors in second {s}</title></rect>"##,
            px(s as f64) + bar * 0.15,
            pr(n as f64),
            bar * 0.7,
            rate_top + RATE_H - pr(n as f64)
        );
    }
    let points: Vec<Option<(f64, f64)>> = completed
        .iter()
        .enumerate()
        .map(|(s, &n)| Some((px(s as f64 + 0.5), pr(n as f64))))
        .collect();
    polylines(&mut out, &points, "#333", "", "calls completed per second");
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">seconds since the start of the run</text>"#,
        LEFT + WIDTH / 2.0,
        rate_top + RATE_H + 35.0
    );

    // Legend.
    let legend_x = LEFT + WIDTH + 25.0;
    let mut entries: Vec<(&str, &str, &str, bool)> = SERIES
        .iter()
        .map(|s| (s.name, s.colour, s.dash, false))
        .collect();
    entries.push(("calls completed", "#333", "", false));
    entries.push(("errors", "#d62728", "", true));
    if outcome.outage.is_some() {
        entries.push(("outage", "#d62728", "", true));
    }
    for (i, (name, colour, dash, block)) in entries.into_iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 20.0;
        if block {
            let opacity = if name == "outage" { "0.12" } else { "1" };
            let _ = writeln!(
                out,
                r#"<rect x="{legend_x}" y="{}" width="25" height="10" fill="{colour}" fill-opacity="{opacity}"/>"#,
                y - 5.0
            );
        } else {
            let _ = writeln!(
                out,
                r#"<line x1="{legend_x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
                legend_x + 25.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" font-size="11">{name}</text>"#,
            legend_x + 30.0,
            y + 4.0
        );
    }
    out.push_str("</svg>\n");
    out
}
