//! The run's figures: per operation the count, the rate, latency percentiles and errors by
//! kind, as a Markdown table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::run::{Op, Outcome, Sample};

/// The figures of a set of calls.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub count: usize,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    /// Errors by kind.
    pub errors: BTreeMap<&'static str, usize>,
}

impl Stats {
    /// The figures of `samples` (latencies in milliseconds, failed calls included: a caller
    /// waited for them too).
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Self {
        let mut millis = Vec::new();
        let mut errors = BTreeMap::new();
        for sample in samples {
            millis.push(sample.latency.as_secs_f64() * 1000.0);
            if let Some(kind) = sample.error {
                *errors.entry(kind).or_insert(0) += 1;
            }
        }
        millis.sort_by(f64::total_cmp);
        Self {
            count: millis.len(),
            p50: percentile(&millis, 0.50),
            p95: percentile(&millis, 0.95),
            p99: percentile(&millis, 0.99),
            max: millis.last().copied().unwrap_or(f64::NAN),
            errors,
        }
    }

    fn errors_text(&self) -> String {
        if self.errors.is_empty() {
            return "0".to_owned();
        }
        self.errors
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The nearest-rank percentile `p` (0 to 1) of sorted values; NaN for none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Milliseconds with the decimals their size deserves.
pub fn ms(value: f64) -> String {
    if !value.is_finite() {
        "-".to_owned()
    } else if value < 10.0 {
        format!("{value:.2}")
    } else if value < 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

fn row(out: &mut String, name: &str, stats: &Stats, seconds: f64) {
    let _ = writeln!(
        out,
        "| {name} | {} | {:.1} | {} | {} | {} | {} | {} |",
        stats.count,
        stats.count as f64 / seconds,
        ms(stats.p50),
        ms(stats.p95),
        ms(stats.p99),
        ms(stats.max),
        stats.errors_text()
    );
}

/// The table: a row per operation (sends also by their number of recipients), and the total.
/// Rates are over the run's duration; an operation counts from the call made before the
/// deadline, however long after it returned.
pub fn table(outcome: &Outcome) -> String {
    let seconds = outcome.duration.as_secs_f64().max(1e-9);
    let mut out = String::new();
    out.push_str("| operation | count | ops/s | p50 ms | p95 ms | p99 ms | max ms | errors |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---|\n");
    for op in Op::ALL {
        let stats = Stats::of(outcome.samples.iter().filter(|s| s.op == op));
        row(&mut out, op.name(), &stats, seconds);
        if op == Op::Send {
            for (name, range) in [
                ("… to 1-9 recipients", 1..10),
                ("… to 10-49", 10..50),
                ("… to 50-100", 50..101),
            ] {
                let stats = Stats::of(
                    outcome
                        .samples
                        .iter()
                        .filter(|s| s.op == Op::Send && range.contains(&s.size)),
                );
                row(&mut out, name, &stats, seconds);
            }
        }
    }
    let total = Stats::of(&outcome.samples);
    row(&mut out, "**total**", &total, seconds);
    out
}

/// The calls made while the proxy refused connections, and those made in the rest of the run.
pub fn outage_summary(outcome: &Outcome) -> Option<String> {
    let outage = outcome.outage?;
    let during = |s: &&Sample| s.start >= outage.start && s.start < outage.end;
    // Calls in flight when the connections were cut: started before, returned after.
    let cut = |s: &&Sample| s.start < outage.start && s.start + s.latency > outage.start;
    let inside = Stats::of(outcome.samples.iter().filter(during));
    let caught = Stats::of(outcome.samples.iter().filter(cut));
    let outside = Stats::of(outcome.samples.iter().filter(|s| !during(s) && !cut(s)));
    let secs = |d: Duration| d.as_secs_f64();
    Some(format!(
        "outage: connections cut at {:.1} s, new ones refused until {:.1} s; the proxy accepted {} \
         connections before the cut and {} after it, and refused {}\n\
         calls in flight at the cut: {} (p50 {} ms, p99 {} ms, max {} ms), errors: {}\n\
         calls made during the outage: {} (p50 {} ms, p99 {} ms, max {} ms), errors: {}\n\
         every other call: {} (p50 {} ms, p99 {} ms, max {} ms), errors: {}",
        secs(outage.start),
        secs(outage.end),
        outage.accepted_before,
        outage.accepted - outage.accepted_before,
        outage.refused,
        caught.count,
        ms(caught.p50),
        ms(caught.p99),
        ms(caught.max),
        caught.errors_text(),
        inside.count,
        ms(inside.p50),
        ms(inside.p99),
        ms(inside.max),
        inside.errors_text(),
        outside.count,
        ms(outside.p50),
        ms(outside.p99),
        ms(outside.max),
        outside.errors_text(),
    ))
}

/// The commands the calls sent, in all and per call, by name.
pub fn commands(outcome: &Outcome) -> String {
    let total: usize = outcome.commands.values().sum();
    let calls = outcome.samples.len().max(1) as f64;
    let by_name: Vec<String> = outcome
        .commands
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    format!(
        "commands sent by the calls: {total} ({:.2} per call): {}",
        total as f64 / calls,
        by_name.join(", ")
    )
}
