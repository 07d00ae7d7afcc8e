//! The figures `compare` measures, and how they are shown: a table on stdout, a CSV file and an
//! SVG chart.

use std::fmt::Write as _;

/// Who a figure belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Who {
    /// The display name, such as `fan-out-on-write` or `seed hybrid`.
    pub name: &'static str,
    pub kind: Kind,
    /// The seed design this one is compared with (its own name for a seed).
    pub baseline: &'static str,
}

/// Library code, the seed's literal algorithm, plain driver calls written by hand, or the
/// engine's floor: the least work that delivers a message to N inboxes, in one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Library,
    Seed,
    HandWritten,
    Floor,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Library => "library",
            Kind::Seed => "seed",
            Kind::HandWritten => "hand-written",
            Kind::Floor => "engine floor",
        }
    }
}

/// Inbox or comment strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    Inbox,
    Comments,
}

impl Area {
    fn name(self) -> &'static str {
        match self {
            Area::Inbox => "inbox",
            Area::Comments => "comments",
        }
    }
}

/// One measured figure: a subject, an operation at a size, and its repetitions.
#[derive(Clone, Debug)]
pub struct Row {
    pub area: Area,
    pub who: Who,
    /// What was done, such as `send` or `page, last 50`.
    pub operation: &'static str,
    /// The size the operation ran at (see [`Operation::size`] for each operation's meaning).
    pub n: usize,
    pub commands: Vec<usize>,
    pub millis: Vec<f64>,
    /// Storage rows: bytes of data and of indexes per item, and a note.
    pub storage: Option<Storage>,
    /// Why the figure is missing or partial.
    pub skipped: Option<String>,
    /// Measured without a warm-up (over the time budget): no ratio is given against it.
    pub cold: bool,
}

/// Bytes stored per item (message or comment), from `collStats`.
#[derive(Clone, Debug)]
pub struct Storage {
    pub data_per_item: f64,
    pub index_per_item: f64,
    pub note: String,
}

impl Row {
    pub fn new(area: Area, who: Who, operation: &'static str, n: usize) -> Self {
        Self {
            area,
            who,
            operation,
            n,
            commands: Vec::new(),
            millis: Vec::new(),
            storage: None,
            skipped: None,
            cold: false,
        }
    }

    /// Repetitions measured.
    pub fn reps(&self) -> usize {
        self.millis.len()
    }

    pub fn commands_median(&self) -> f64 {
        median(&self.commands.iter().map(|&c| c as f64).collect::<Vec<_>>())
    }

    pub fn millis_median(&self) -> f64 {
        median(&self.millis)
    }

    /// The seed row for the same operation and size, when both were measured warm and this
    /// is not that row.
    fn baseline<'a>(&self, rows: &'a [Row]) -> Option<&'a Row> {
        rows.iter()
            .find(|other| {
                other.who.kind == Kind::Seed
                    && other.who.name == self.who.baseline
                    && other.operation == self.operation
                    && other.n == self.n
                    && other.storage.is_none()
            })
            .filter(|base| base.who != self.who && !base.cold && !self.cold)
    }

    /// Median commands and latency as ratios to the seed's (NaN without a baseline).
    fn ratios(&self, rows: &[Row]) -> (f64, f64) {
        match self.baseline(rows) {
            Some(base) if self.storage.is_none() => (
                ratio(self.commands_median(), base.commands_median()),
                ratio(self.millis_median(), base.millis_median()),
            ),
            _ => (f64::NAN, f64::NAN),
        }
    }
}

/// The operations measured, in the order they are shown, and what their size means.
pub struct Operation {
    pub name: &'static str,
    pub area: Area,
    /// What `n` counts, for the table's header.
    pub size: &'static str,
}

fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

fn ratio(value: f64, base: f64) -> f64 {
    if base > 0.0 {
        value / base
    } else {
        f64::NAN
    }
}

/// A figure with `decimals` decimals and a unit suffix, or `-` when there is none.
pub fn show(value: f64, decimals: usize, suffix: &str) -> String {
    if value.is_finite() {
        format!("{value:.decimals$}{suffix}")
    } else {
        "-".to_owned()
    }
}

/// The table: one block per operation, one line per subject and size, with ratios to the seed.
pub fn print_table(rows: &[Row], operations: &[Operation]) {
    let rule = "-".repeat(101);
    println!(
        "{:<32} {:<18} {:>6} {:>4} {:>10} {:>8} {:>10} {:>8}",
        "subject", "operation", "N", "reps", "commands", "vs seed", "median ms", "vs seed"
    );
    for operation in operations {
        let block: Vec<&Row> = rows
            .iter()
            .filter(|row| row.operation == operation.name && row.storage.is_none())
            .collect();
        if block.is_empty() {
            continue;
        }
        println!("{rule}");
        println!(
            "{}: {} (N = {})",
            operation.area.name(),
            operation.name,
            operation.size
        );
        for row in block {
            let (commands_ratio, millis_ratio) = row.ratios(rows);
            let min = row.commands.iter().min().copied().unwrap_or(0);
            let max = row.commands.iter().max().copied().unwrap_or(0);
            let commands = if row.commands.is_empty() {
                "-".to_owned()
            } else if min == max {
                format!("{min}")
            } else {
                format!("{} ({min}-{max})", row.commands_median())
            };
            println!(
                "{:<32} {:<18} {:>6} {:>4} {:>10} {:>8} {:>10} {:>8}  {}",
                row.who.name,
                operation.name,
                row.n,
                row.reps(),
                commands,
                show(commands_ratio, 3, "x"),
                show(row.millis_median(), 2, ""),
                show(millis_ratio, 2, "x"),
                row.skipped.as_deref().unwrap_or("")
            );
        }
    }
    println!("{rule}");
    println!(
        "\n{:<32} {:<30} {:>11} {:>11} {:>11}  note",
        "subject", "storage", "data B", "index B", "total B"
    );
    for row in rows {
        if let Some(storage) = &row.storage {
            println!(
                "{:<32} {:<30} {:>11} {:>11} {:>11}  {}",
                row.who.name,
                format!("{} {}", row.operation, row.n),
                show(storage.data_per_item, 0, ""),
                show(storage.index_per_item, 0, ""),
                show(storage.data_per_item + storage.index_per_item, 0, ""),
                storage.note
            );
        }
    }
}

/// Each library subject next to the same calls written by hand (`pairs` of names), for every
/// operation and size both have.
pub fn print_overhead(rows: &[Row], pairs: &[(&str, &str)]) {
    println!("\nlibrary overhead: through the API vs the same calls written by hand");
    println!(
        "{:<18} {:<18} {:>6} {:>11} {:>11} {:>9} {:>9} {:>9}",
        "library", "op", "N", "library ms", "by hand ms", "lib/hand", "lib cmds", "hand cmds"
    );
    for &(library, hand) in pairs {
        for row in rows
            .iter()
            .filter(|row| row.who.name == library && row.storage.is_none())
        {
            let Some(by_hand) = rows.iter().find(|other| {
                other.who.name == hand && other.operation == row.operation && other.n == row.n
            }) else {
                continue;
            };
            println!(
                "{:<18} {:<18} {:>6} {:>11} {:>11} {:>9} {:>9} {:>9}",
                library,
                row.operation,
                row.n,
                show(row.millis_median(), 2, ""),
                show(by_hand.millis_median(), 2, ""),
                show(ratio(row.millis_median(), by_hand.millis_median()), 2, "x"),
                show(row.commands_median(), 0, ""),
                show(by_hand.commands_median(), 0, "")
            );
        }
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// Every row as CSV, with the server and how it was measured in `#` comment lines.
pub fn csv(rows: &[Row], server: &str, reps: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# server: {server}");
    let _ = writeln!(
        out,
        "# cargo run --release --example compare; median of up to {reps} repetitions (see the \
         reps column); latency is wall-clock on this machine, FerretDB figures are not MongoDB's"
    );
    out.push_str(
        "area,subject,kind,baseline,operation,n,reps,commands_median,commands_min,commands_max,\
         latency_ms_median,commands_ratio_vs_seed,latency_ratio_vs_seed,\
         data_bytes_per_item,index_bytes_per_item,note\n",
    );
    let fmt = |value: f64| {
        if value.is_finite() {
            format!("{value:.4}")
        } else {
            String::new()
        }
    };
    for row in rows {
        let (commands_ratio, latency_ratio) = row.ratios(rows);
        let (commands_ratio, latency_ratio) = (fmt(commands_ratio), fmt(latency_ratio));
        let (data, index, note) = match &row.storage {
            Some(s) => (
                fmt(s.data_per_item),
                fmt(s.index_per_item),
                csv_field(&s.note),
            ),
            None => (
                String::new(),
                String::new(),
                csv_field(row.skipped.as_deref().unwrap_or("")),
            ),
        };
        let (median_commands, min, max, millis) = if row.storage.is_some() {
            Default::default()
        } else {
            let bound = |value: Option<&usize>| value.map_or(String::new(), usize::to_string);
            (
                fmt(row.commands_median()),
                bound(row.commands.iter().min()),
                bound(row.commands.iter().max()),
                fmt(row.millis_median()),
            )
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{median_commands},{min},{max},{millis},{commands_ratio},\
             {latency_ratio},{data},{index},{note}",
            row.area.name(),
            csv_field(row.who.name),
            row.who.kind.name(),
            csv_field(row.who.baseline),
            csv_field(row.operation),
            row.n,
            row.reps(),
        );
    }
    out
}

/// One panel of the chart: an operation's median commands or latency against its size, a line
/// per subject, both axes logarithmic.
pub struct Panel {
    pub title: &'static str,
    pub x_label: &'static str,
    pub y_label: &'static str,
    pub operation: &'static str,
    /// Plot commands (else latency).
    pub commands: bool,
}

const CHART_W: f64 = 400.0;
const CHART_H: f64 = 280.0;
const LEFT: f64 = 70.0;
const GAP: f64 = 110.0;
const TOP: f64 = 70.0;
const LEGEND_W: f64 = 230.0;

/// The (stroke colour, dash pattern) of `who`: one colour per seed design, shared by the designs
/// compared with it; seeds dashed, hand-written calls dotted.
fn style(who: Who, families: &[&'static str]) -> (&'static str, &'static str) {
    const PALETTE: [&str; 6] = [
        "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#17becf",
    ];
    let family = families
        .iter()
        .position(|&f| f == who.baseline)
        .unwrap_or(0);
    let colour = PALETTE[family % PALETTE.len()];
    match who.kind {
        Kind::Library => (colour, ""),
        Kind::Seed => (colour, "6,4"),
        Kind::HandWritten => ("#ff7f0e", "2,3"),
        Kind::Floor => ("#7f7f7f", "1,3"),
    }
}

/// Ticks at powers of ten from `lo` to `hi` (log10 positions).
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

fn draw_panel(out: &mut String, rows: &[Row], panel: &Panel, left: f64, families: &[&'static str]) {
    let value = |row: &Row| {
        if panel.commands {
            row.commands_median()
        } else {
            row.millis_median()
        }
    };
    let points: Vec<&Row> = rows
        .iter()
        .filter(|row| row.operation == panel.operation && row.storage.is_none())
        .filter(|row| value(row).is_finite() && value(row) > 0.0)
        .collect();
    if points.is_empty() {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" font-size="13" text-anchor="middle">{}: no figures in this run</text>"#,
            left + CHART_W / 2.0,
            TOP + CHART_H / 2.0,
            panel.title
        );
        return;
    }
    let fold = |f: fn(f64, f64) -> f64, init: f64, get: &dyn Fn(&Row) -> f64| {
        points.iter().map(|row| get(row)).fold(init, f)
    };
    let x_ticks = log_ticks(
        fold(f64::min, f64::INFINITY, &|row| row.n as f64),
        fold(f64::max, 1.0, &|row| row.n as f64),
    );
    let y_ticks = log_ticks(
        fold(f64::min, f64::INFINITY, &value),
        fold(f64::max, 1.0, &value),
    );
    let (x0, x1) = (x_ticks[0].0, x_ticks[x_ticks.len() - 1].0);
    let (y0, y1) = (y_ticks[0].0, y_ticks[y_ticks.len() - 1].0);
    let px = |x: f64| left + (x.log10() - x0) / (x1 - x0) * CHART_W;
    let py = |y: f64| TOP + CHART_H - (y.log10() - y0) / (y1 - y0) * CHART_H;

    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold" text-anchor="middle">{}</text>"#,
        left + CHART_W / 2.0,
        TOP - 15.0,
        panel.title
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{TOP}" width="{CHART_W}" height="{CHART_H}" fill="none" stroke="#999"/>"##
    );
    for (x, label) in &x_ticks {
        let at = left + (x - x0) / (x1 - x0) * CHART_W;
        let _ = writeln!(
            out,
            r##"<line x1="{at:.1}" y1="{TOP}" x2="{at:.1}" y2="{}" stroke="#eee"/><text x="{at:.1}" y="{}" font-size="11" text-anchor="middle">{label}</text>"##,
            TOP + CHART_H,
            TOP + CHART_H + 15.0
        );
    }
    for (y, label) in &y_ticks {
        let at = TOP + CHART_H - (y - y0) / (y1 - y0) * CHART_H;
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{at:.1}" x2="{}" y2="{at:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{label}</text>"##,
            left + CHART_W,
            left - 5.0,
            at + 4.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
        left + CHART_W / 2.0,
        TOP + CHART_H + 35.0,
        panel.x_label
    );
    let _ = writeln!(
        out,
        r#"<text x="{0}" y="{1}" font-size="12" text-anchor="middle" transform="rotate(-90 {0} {1})">{2}</text>"#,
        left - 50.0,
        TOP + CHART_H / 2.0,
        panel.y_label
    );
    let mut subjects: Vec<Who> = Vec::new();
    for row in &points {
        if !subjects.contains(&row.who) {
            subjects.push(row.who);
        }
    }
    for who in subjects {
        let (colour, dash) = style(who, families);
        let mut line: Vec<(f64, f64)> = points
            .iter()
            .filter(|row| row.who == who)
            .map(|row| (px(row.n as f64), py(value(row))))
            .collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = line.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"><title>{}</title></polyline>"#,
            path.join(" "),
            who.name
        );
        for (x, y) in line {
            let _ = writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="2.5" fill="{colour}"/>"#
            );
        }
    }
}

/// The chart: `panels` side by side, two to a row, and a legend of every subject.
pub fn svg(rows: &[Row], panels: &[Panel], server: &str) -> String {
    let mut families: Vec<&'static str> = Vec::new();
    let mut subjects: Vec<Who> = Vec::new();
    for row in rows {
        if !families.contains(&row.who.baseline) {
            families.push(row.who.baseline);
        }
        if !subjects.contains(&row.who) {
            subjects.push(row.who);
        }
    }
    let columns = 2;
    let panel_w = LEFT + CHART_W + GAP - LEFT;
    let panel_h = CHART_H + 110.0;
    let panel_rows = panels.len().div_ceil(columns).max(1);
    let width = LEFT + columns as f64 * panel_w + LEGEND_W;
    let height =
        (panel_rows as f64 * panel_h + 40.0).max(TOP + 20.0 * subjects.len() as f64 + 40.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="18" font-size="12">server: {} (FerretDB figures are not MongoDB's; command counts carry over)</text>"#,
        xml_escape(server)
    );
    for (i, panel) in panels.iter().enumerate() {
        let (column, line) = (i % columns, i / columns);
        let mut group = String::new();
        draw_panel(
            &mut group,
            rows,
            panel,
            LEFT + column as f64 * panel_w,
            &families,
        );
        let _ = writeln!(
            out,
            r#"<g transform="translate(0 {})">"#,
            line as f64 * panel_h
        );
        out.push_str(&group);
        out.push_str("</g>\n");
    }
    let legend_x = LEFT + columns as f64 * panel_w;
    for (i, who) in subjects.into_iter().enumerate() {
        let (colour, dash) = style(who, &families);
        let y = TOP + i as f64 * 20.0;
        let _ = writeln!(
            out,
            r#"<line x1="{legend_x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            legend_x + 25.0,
            legend_x + 30.0,
            y + 4.0,
            who.name
        );
    }
    out.push_str("</svg>\n");
    out
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
