//! The evidence for choosing a strategy: the library's three strategies against the seed blog
//! post's literal designs, on the same server in the same run.
//!
//! ```text
//! cargo run --release --example compare                     # N = 1, 10, 100, 1000 (a few minutes)
//! COMPARE_SCALE=full cargo run --release --example compare  # adds N = 10000 (slow on FerretDB)
//! COMPARE_REPS=9 cargo run --release --example compare      # repetitions per figure (default 5)
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Measures, per strategy and
//! per seed baseline (`benches/support/seed_baselines.rs`):
//! - commands per operation (a [`CommandCounter`] on the client) and median wall-clock latency of
//!   a send to N recipients, and of reading the newest 50 / 100 / 500 messages of an inbox holding
//!   1000 messages (one untimed warm-up, then `COMPARE_REPS` timed repetitions);
//! - storage per message from `collStats` (`size`, `totalIndexSize`), summed over the strategy's
//!   collections;
//! - library overhead: `FanOutOnWrite` through the API next to the same `insert_many` + `find`
//!   written by hand.
//!
//! Every measurement uses its own database, dropped before and after use (on FerretDB 1.x every
//! query but `{_id: X}` scans its whole collection, so sharing one would measure the neighbours).
//! Prints a table and writes `target/compare/results.csv` and `target/compare/cost.svg`.
//! Latencies are reported, never asserted: they depend on the machine and the server, and
//! FerretDB figures are not MongoDB's.

#[path = "../benches/support/seed_baselines.rs"]
mod seed_baselines;

use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bson::{doc, Bson, Document, RawDocumentBuf};
use futures::TryStreamExt;
use mongo_social::testing::{self, CommandCounter};
use mongo_social::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, Message, NewMessage, PageRequest,
};
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, Database};

use seed_baselines::SeedBaseline;

type BoxResult<T> = Result<T, Box<dyn Error>>;

/// The payload every message carries (100 bytes, a short chat message).
const PAYLOAD: &str =
    "Hi! Are we still on for the design review at 3? I moved the slides to the shared drive. -j";
/// Messages in the inbox the read figures page through.
const INBOX_SIZE: usize = 1000;
/// How many of the newest messages each read asks for.
const READ_SIZES: [usize; 3] = [50, 100, 500];
/// The owner of the read inbox.
const OWNER: &str = "bob";

/// Who is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    Library(Lib),
    Seed(SeedBaseline),
    /// `FanOutOnWrite`'s document layout, written and read with plain driver calls.
    HandWritten,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lib {
    FanOutOnRead,
    FanOutOnWrite,
    Bucketed,
}

/// Everyone measured: the library's strategies, the seed's designs, the hand-written calls.
fn subjects() -> Vec<Subject> {
    let library = [Lib::FanOutOnRead, Lib::FanOutOnWrite, Lib::Bucketed].map(Subject::Library);
    let seed = SeedBaseline::ALL.map(Subject::Seed);
    library
        .into_iter()
        .chain(seed)
        .chain([Subject::HandWritten])
        .collect()
}

impl Subject {
    fn name(self) -> &'static str {
        match self {
            Subject::Library(Lib::FanOutOnRead) => "fan-out-on-read",
            Subject::Library(Lib::FanOutOnWrite) => "fan-out-on-write",
            Subject::Library(Lib::Bucketed) => "bucketed-fan-out",
            Subject::Seed(seed) => seed.name(),
            Subject::HandWritten => "hand-written fan-out-on-write",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Subject::Library(_) => "library",
            Subject::Seed(_) => "seed",
            Subject::HandWritten => "hand-written",
        }
    }

    /// The seed design this subject is compared with.
    fn seed(self) -> SeedBaseline {
        match self {
            Subject::Library(Lib::FanOutOnRead) => SeedBaseline::FanOutOnRead,
            Subject::Library(Lib::FanOutOnWrite) | Subject::HandWritten => {
                SeedBaseline::FanOutOnWrite
            }
            Subject::Library(Lib::Bucketed) => SeedBaseline::Bucketed,
            Subject::Seed(seed) => seed,
        }
    }

    fn slug(self) -> String {
        self.name().replace([' ', '-'], "_")
    }

    /// (stroke colour, dash pattern) in the chart.
    fn style(self) -> (&'static str, &'static str) {
        let colour = match self.seed() {
            SeedBaseline::FanOutOnRead => "#1f77b4",
            SeedBaseline::FanOutOnWrite => "#d62728",
            SeedBaseline::Bucketed => "#2ca02c",
        };
        match self {
            Subject::Library(_) => (colour, ""),
            Subject::Seed(_) => (colour, "6,4"),
            Subject::HandWritten => ("#ff7f0e", "2,3"),
        }
    }

    /// Creates the subject's indexes in `db` and returns something that can send and read there.
    async fn open(self, db: &Database) -> BoxResult<Target> {
        Ok(match self {
            Subject::Library(lib) => {
                let store: Arc<DynInboxStore<String>> = match lib {
                    Lib::FanOutOnRead => Arc::new(FanOutOnRead::new(db)),
                    Lib::FanOutOnWrite => Arc::new(FanOutOnWrite::new(db)),
                    Lib::Bucketed => Arc::new(BucketedFanOut::new(db)),
                };
                store.create_indexes().await?;
                Target::Store(store)
            }
            Subject::Seed(seed) => {
                seed.create_indexes(db).await?;
                Target::Seed(seed, db.clone())
            }
            Subject::HandWritten => {
                // The same unique index the library creates.
                FanOutOnWrite::new(db).create_indexes().await?;
                Target::Hand(db.collection(FanOutOnWrite::DEFAULT_COLLECTION))
            }
        })
    }
}

enum Target {
    Store(Arc<DynInboxStore<String>>),
    Seed(SeedBaseline, Database),
    Hand(Collection<Document>),
}

impl Target {
    async fn send(&self, from: &str, to: &[String]) -> BoxResult<()> {
        match self {
            Target::Store(store) => {
                store
                    .send(NewMessage::new(
                        from,
                        to.iter().cloned(),
                        PAYLOAD.to_owned(),
                    ))
                    .await?;
            }
            Target::Seed(seed, db) => seed.send(db, from, to, PAYLOAD).await?,
            Target::Hand(copies) => {
                // What `FanOutOnWrite::send` stores, without the library: one unordered
                // `insert` of one copy per recipient.
                let message = doc! {
                    "id": bson::oid::ObjectId::new(),
                    "from": from,
                    "to": to,
                    "sent": bson::DateTime::now(),
                    "message": PAYLOAD,
                };
                let copies_of = to.iter().map(|recipient| {
                    let mut copy = message.clone();
                    copy.insert("recipient", recipient.as_str());
                    copy
                });
                copies.insert_many(copies_of).ordered(false).await?;
            }
        }
        Ok(())
    }

    /// Reads the newest `n` messages of `owner` and returns how many came back.
    async fn read(&self, owner: &str, n: usize) -> BoxResult<usize> {
        Ok(match self {
            Target::Store(store) => store
                .inbox_page(owner, PageRequest::first(n))
                .await?
                .items
                .len(),
            Target::Seed(seed, db) => seed.read(db, owner, n).await?.len(),
            Target::Hand(copies) => {
                let messages: Vec<Message<String>> = copies
                    .clone_with_type::<Message<String>>()
                    .find(doc! { "recipient": owner })
                    .sort(doc! { "sent": -1, "id": -1 })
                    .limit(n as i64)
                    .batch_size(n as u32)
                    .await?
                    .try_collect()
                    .await?;
                messages.len()
            }
        })
    }
}

/// One measured figure.
#[derive(Clone, Debug)]
struct Row {
    subject: Subject,
    /// `send`, `read` or `storage`.
    operation: &'static str,
    /// Recipients for `send`, messages read for `read`, messages stored for `storage`.
    n: usize,
    reps: usize,
    commands: Vec<usize>,
    millis: Vec<f64>,
    /// Storage rows: bytes of data and of indexes per message, and a note.
    storage: Option<Storage>,
    /// Why the figure is missing or partial.
    skipped: Option<String>,
}

#[derive(Clone, Debug)]
struct Storage {
    data_per_message: f64,
    index_per_message: f64,
    note: String,
}

impl Row {
    fn commands_median(&self) -> f64 {
        median(&self.commands.iter().map(|&c| c as f64).collect::<Vec<_>>())
    }

    fn millis_median(&self) -> f64 {
        median(&self.millis)
    }
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

struct Bench {
    client: Client,
    commands: CommandCounter,
    reps: usize,
    /// Longest a send figure may take, all repetitions together (milliseconds).
    budget_ms: f64,
    /// Print every repetition's commands.
    trace: bool,
}

impl Bench {
    /// A fresh database for one (subject, operation, size) measurement.
    async fn fresh_db(&self, subject: Subject, what: &str) -> BoxResult<Database> {
        let name = testing::database_name(&format!("cmp_{}_{what}", subject.slug()));
        let db = self.client.database(&name);
        db.drop().await?;
        Ok(db)
    }

    /// Measures a send to `n` recipients. `predicted_ms` (from the previous size) sets how many
    /// repetitions fit in the budget; above the budget the figure is skipped.
    async fn measure_send(
        &self,
        subject: Subject,
        n: usize,
        predicted_ms: Option<f64>,
    ) -> BoxResult<(Row, Option<Row>)> {
        let mut row = Row {
            subject,
            operation: "send",
            n,
            reps: 0,
            commands: Vec::new(),
            millis: Vec::new(),
            storage: None,
            skipped: None,
        };
        let predicted = predicted_ms.unwrap_or(0.0);
        if predicted > self.budget_ms {
            row.skipped = Some(format!(
                "skipped: predicted {:.0} s per send > budget {:.0} s (COMPARE_BUDGET_S)",
                predicted / 1000.0,
                self.budget_ms / 1000.0
            ));
            return Ok((row, None));
        }
        let fit = (self.budget_ms / predicted.max(1e-3)).floor() as usize;
        let reps = fit.saturating_sub(1).clamp(1, self.reps);
        let warm_up = predicted * (reps as f64 + 1.0) <= self.budget_ms;
        row.reps = reps;

        let db = self.fresh_db(subject, &format!("send_{n}")).await?;
        let target = subject.open(&db).await?;
        let recipients: Vec<String> = (0..n).map(|i| format!("user{i:05}")).collect();
        if warm_up {
            // Connections, and each recipient's first bucket / user document.
            target.send("joe", &recipients).await?;
        } else {
            row.skipped = Some("no warm-up (over budget)".to_owned());
        }
        let figure_started = Instant::now();
        for _ in 0..reps {
            if !row.millis.is_empty()
                && figure_started.elapsed().as_secs_f64() * 1000.0 > self.budget_ms
            {
                // Slower than predicted: keep what fits in the budget.
                break;
            }
            self.commands.reset();
            let started = Instant::now();
            target.send("joe", &recipients).await?;
            row.millis.push(started.elapsed().as_secs_f64() * 1000.0);
            row.commands.push(self.commands.total());
            if self.trace {
                eprintln!(
                    "    {} send N={n}: {:.2} ms {:?}",
                    subject.name(),
                    row.millis.last().copied().unwrap_or_default(),
                    self.commands.snapshot()
                );
            }
        }
        // Storage per delivered copy, for a message with many recipients.
        let storage = if n <= 100 {
            row.reps = row.millis.len();
            let deliveries = (row.reps + usize::from(warm_up)) * n;
            Some(Row {
                subject,
                operation: "storage/delivery, send to",
                n,
                reps: 1,
                commands: Vec::new(),
                millis: Vec::new(),
                storage: Some(storage(&db, subject, deliveries).await?),
                skipped: None,
            })
        } else {
            None
        };
        row.reps = row.millis.len();
        db.drop().await?;
        Ok((row, storage))
    }

    async fn measure_reads(&self, subject: Subject) -> BoxResult<Vec<Row>> {
        let db = self.fresh_db(subject, "read").await?;
        let target = subject.open(&db).await?;
        let to = [OWNER.to_owned()];
        let senders = ["joe", "jane", "li", "omar"];
        for i in 0..INBOX_SIZE {
            target.send(senders[i % senders.len()], &to).await?;
        }
        let mut rows = vec![Row {
            subject,
            operation: "storage/message, inbox of",
            n: INBOX_SIZE,
            reps: 1,
            commands: Vec::new(),
            millis: Vec::new(),
            storage: Some(storage(&db, subject, INBOX_SIZE).await?),
            skipped: None,
        }];
        for n in READ_SIZES {
            let got = target.read(OWNER, n).await?; // warm-up
            if got != n {
                return Err(format!("{}: read {got} of the newest {n}", subject.name()).into());
            }
            let mut row = Row {
                subject,
                operation: "read",
                n,
                reps: self.reps,
                commands: Vec::new(),
                millis: Vec::new(),
                storage: None,
                skipped: None,
            };
            for _ in 0..self.reps {
                self.commands.reset();
                let started = Instant::now();
                target.read(OWNER, n).await?;
                row.millis.push(started.elapsed().as_secs_f64() * 1000.0);
                row.commands.push(self.commands.total());
            }
            rows.push(row);
        }
        db.drop().await?;
        Ok(rows)
    }
}

fn number(value: Option<&Bson>) -> Option<f64> {
    match value? {
        Bson::Int32(v) => Some(f64::from(*v)),
        Bson::Int64(v) => Some(*v as f64),
        Bson::Double(v) => Some(*v),
        _ => None,
    }
}

/// Data and index bytes of every collection in `db` (one strategy's database), per message.
async fn storage(db: &Database, subject: Subject, messages: usize) -> BoxResult<Storage> {
    let mut data = 0.0;
    let mut index = 0.0;
    let mut notes = Vec::new();
    let mut names = match subject {
        Subject::Seed(seed) => seed.collections().iter().map(|&n| n.to_owned()).collect(),
        // Everything the store created: the database is the strategy's alone.
        _ => db.list_collection_names().await?,
    };
    names.sort();
    for name in &names {
        if name.starts_with("system.") {
            continue;
        }
        let stats = db.run_command(doc! { "collStats": name.as_str() }).await?;
        match number(stats.get("size")) {
            Some(size) => data += size,
            None => {
                // Estimate: the encoded size of every document.
                let mut cursor = db.collection::<RawDocumentBuf>(name).find(doc! {}).await?;
                while let Some(document) = cursor.try_next().await? {
                    data += document.as_bytes().len() as f64;
                }
                notes.push(format!("{name}: size missing, estimate from BSON bytes"));
            }
        }
        match number(stats.get("totalIndexSize")) {
            Some(size) => index += size,
            None => notes.push(format!("{name}: totalIndexSize missing, estimate 0")),
        }
    }
    let mut note = format!("collections: {}", names.join("+"));
    if !notes.is_empty() {
        note = format!("estimate ({}); {note}", notes.join("; "));
    }
    Ok(Storage {
        data_per_message: data / messages as f64,
        index_per_message: index / messages as f64,
        note,
    })
}

/// A send's latency at `n`, extrapolated from the last two sizes measured: FerretDB's costs grow
/// faster than linearly with N (every update statement scans its collection), so the growth
/// exponent is taken from the data, between 1 and 2.5 (2 when only one size is known).
fn predict(measured: &[(usize, f64)], n: usize) -> Option<f64> {
    let &(last_n, last_ms) = measured.last()?;
    let exponent = match measured.len().checked_sub(2).map(|i| measured[i]) {
        Some((prev_n, prev_ms)) if prev_ms > 0.0 && last_n > prev_n => {
            ((last_ms / prev_ms).ln() / (last_n as f64 / prev_n as f64).ln()).clamp(1.0, 2.5)
        }
        _ => 2.0,
    };
    Some(last_ms * (n as f64 / last_n as f64).powf(exponent))
}

/// The seed row for the same operation and size as `row`.
fn baseline<'a>(rows: &'a [Row], row: &Row) -> Option<&'a Row> {
    rows.iter().find(|other| {
        other.subject == Subject::Seed(row.subject.seed())
            && other.operation == row.operation
            && other.n == row.n
    })
}

fn ratio(value: f64, base: f64) -> f64 {
    if base > 0.0 {
        value / base
    } else {
        f64::NAN
    }
}

#[tokio::main]
async fn main() -> BoxResult<()> {
    let full = std::env::var("COMPARE_SCALE").is_ok_and(|scale| scale == "full");
    let reps: usize = match std::env::var("COMPARE_REPS") {
        Ok(value) => value
            .parse()
            .map_err(|_| format!("COMPARE_REPS must be a positive number, not {value:?}"))?,
        Err(_) => 5,
    };
    if reps == 0 {
        return Err("COMPARE_REPS must be at least 1".into());
    }
    let mut sizes = vec![1, 10, 100, 1000];
    if full {
        sizes.push(10_000);
    }

    let commands = CommandCounter::new();
    let mut options = ClientOptions::parse(testing::server_uri()).await?;
    options.server_selection_timeout = Some(testing::SERVER_SELECTION_TIMEOUT);
    commands.attach(&mut options);
    let client = Client::with_options(options)?;
    let server = mongo_social::ServerInfo::detect(&client).await?.describe();
    println!("server: {server}");
    let budget_s: f64 = match std::env::var("COMPARE_BUDGET_S") {
        Ok(value) => value
            .parse()
            .map_err(|_| format!("COMPARE_BUDGET_S must be a number, not {value:?}"))?,
        Err(_) => 10.0,
    };
    if let Ok(list) = std::env::var("COMPARE_SIZES") {
        sizes = list
            .split(',')
            .map(|n| n.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("COMPARE_SIZES must be like 1,10,100, not {list:?}"))?;
    }
    println!(
        "sends to N = {sizes:?} recipients; reads of the newest {READ_SIZES:?} of {INBOX_SIZE} \
         messages; median of up to {reps} repetitions after one warm-up (fewer, or skipped, when \
         a send figure would take over {budget_s} s: see the reps column); payload {} bytes\n",
        PAYLOAD.len()
    );
    let bench = Bench {
        client,
        commands,
        reps,
        budget_ms: budget_s * 1000.0,
        trace: std::env::var_os("COMPARE_TRACE").is_some(),
    };

    let started = Instant::now();
    let mut rows = Vec::new();
    let only = std::env::var("COMPARE_ONLY").unwrap_or_default();
    for subject in subjects() {
        if !subject.name().contains(only.as_str()) {
            continue;
        }
        // (N, median ms) of the sizes measured so far.
        let mut measured: Vec<(usize, f64)> = Vec::new();
        let mut storage_row = None;
        for &n in &sizes {
            let predicted = predict(&measured, n);
            let (row, storage) = bench.measure_send(subject, n, predicted).await?;
            eprintln!(
                "  {:<30} send N={n:<5} {:>6} commands {:>9.2} ms  ({:.0} s elapsed) {}",
                subject.name(),
                row.commands_median(),
                row.millis_median(),
                started.elapsed().as_secs_f64(),
                row.skipped.as_deref().unwrap_or("")
            );
            if !row.millis.is_empty() {
                measured.push((n, row.millis_median()));
            }
            rows.push(row);
            storage_row = storage.or(storage_row);
        }
        rows.extend(storage_row);
        let reads = bench.measure_reads(subject).await?;
        eprintln!(
            "  {:<30} reads done ({:.0} s elapsed)",
            subject.name(),
            started.elapsed().as_secs_f64()
        );
        rows.extend(reads);
    }

    print_table(&rows);
    print_overhead(&rows);

    let out = Path::new("target/compare");
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("results.csv"), csv(&rows, &server, reps))?;
    std::fs::write(out.join("cost.svg"), svg(&rows, &sizes, &server))?;
    println!(
        "\nwrote {} and {} ({:.0} s of measurement)",
        out.join("results.csv").display(),
        out.join("cost.svg").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<30} {:<5} {:>5} {:>4} {:>9} {:>10} {:>11} {:>10}",
        "strategy", "op", "N", "reps", "commands", "vs seed", "median ms", "vs seed"
    );
    for operation in ["send", "read"] {
        println!("{}", "-".repeat(91));
        for row in rows.iter().filter(|row| row.operation == operation) {
            let (commands_ratio, millis_ratio) = match baseline(rows, row) {
                Some(base) => (
                    ratio(row.commands_median(), base.commands_median()),
                    ratio(row.millis_median(), base.millis_median()),
                ),
                None => (f64::NAN, f64::NAN),
            };
            let spread = {
                let min = row.commands.iter().min().copied().unwrap_or(0);
                let max = row.commands.iter().max().copied().unwrap_or(0);
                if row.commands.is_empty() {
                    "-".to_owned()
                } else if min == max {
                    format!("{}", row.commands_median())
                } else {
                    format!("{} ({min}-{max})", row.commands_median())
                }
            };
            println!(
                "{:<30} {:<5} {:>5} {:>4} {:>9} {:>10} {:>11} {:>10}  {}",
                row.subject.name(),
                operation,
                row.n,
                row.reps,
                spread,
                show(commands_ratio, 3, "x"),
                show(row.millis_median(), 2, ""),
                show(millis_ratio, 2, "x"),
                row.skipped.as_deref().unwrap_or("")
            );
        }
    }
    println!("{}", "-".repeat(91));
    println!(
        "\n{:<30} {:<30} {:>11} {:>11} {:>11}  note",
        "strategy", "storage", "data B/msg", "index B/msg", "total B/msg"
    );
    for row in rows {
        if let Some(storage) = &row.storage {
            println!(
                "{:<30} {:<30} {:>11.0} {:>11.0} {:>11.0}  {}",
                row.subject.name(),
                format!("{} {}", row.operation, row.n),
                storage.data_per_message,
                storage.index_per_message,
                storage.data_per_message + storage.index_per_message,
                storage.note
            );
        }
    }
}

/// Library `FanOutOnWrite` next to the same calls written by hand.
fn print_overhead(rows: &[Row]) {
    println!(
        "\nlibrary overhead: FanOutOnWrite through the API vs hand-written insert_many + find"
    );
    println!(
        "{:<5} {:>5} {:>13} {:>13} {:>10} {:>13} {:>13}",
        "op", "N", "library ms", "by hand ms", "lib/hand", "library cmds", "by hand cmds"
    );
    for row in rows
        .iter()
        .filter(|row| row.subject == Subject::Library(Lib::FanOutOnWrite) && row.storage.is_none())
    {
        let Some(hand) = rows.iter().find(|other| {
            other.subject == Subject::HandWritten
                && other.operation == row.operation
                && other.n == row.n
        }) else {
            continue;
        };
        println!(
            "{:<5} {:>5} {:>13.2} {:>13.2} {:>9.2}x {:>13} {:>13}",
            row.operation,
            row.n,
            row.millis_median(),
            hand.millis_median(),
            ratio(row.millis_median(), hand.millis_median()),
            row.commands_median(),
            hand.commands_median()
        );
    }
}

/// A figure with `decimals` decimals and a unit suffix, or `-` when there is none.
fn show(value: f64, decimals: usize, suffix: &str) -> String {
    if value.is_finite() {
        format!("{value:.decimals$}{suffix}")
    } else {
        "-".to_owned()
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn csv(rows: &[Row], server: &str, reps: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# server: {server}");
    let _ = writeln!(
        out,
        "# cargo run --release --example compare; median of up to {reps} repetitions (see the \
         reps column); latency is wall-clock on this machine, FerretDB figures are not MongoDB's"
    );
    out.push_str(
        "strategy,kind,operation,n,reps,commands_median,commands_min,commands_max,\
         latency_ms_median,commands_ratio_vs_seed,latency_ratio_vs_seed,\
         data_bytes_per_message,index_bytes_per_message,note\n",
    );
    for row in rows {
        let base = baseline(rows, row);
        let fmt = |value: f64| {
            if value.is_nan() {
                String::new()
            } else {
                format!("{value:.4}")
            }
        };
        let (commands_ratio, latency_ratio) = match (base, &row.storage) {
            (Some(base), None) => (
                fmt(ratio(row.commands_median(), base.commands_median())),
                fmt(ratio(row.millis_median(), base.millis_median())),
            ),
            _ => (String::new(), String::new()),
        };
        let (data, index, note) = match &row.storage {
            Some(s) => (
                fmt(s.data_per_message),
                fmt(s.index_per_message),
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
            (
                fmt(row.commands_median()),
                row.commands
                    .iter()
                    .min()
                    .map_or(String::new(), usize::to_string),
                row.commands
                    .iter()
                    .max()
                    .map_or(String::new(), usize::to_string),
                fmt(row.millis_median()),
            )
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{median_commands},{min},{max},{millis},{commands_ratio},\
             {latency_ratio},{data},{index},{note}",
            csv_field(row.subject.name()),
            row.subject.kind(),
            csv_field(row.operation),
            row.n,
            row.reps,
        );
    }
    out
}

/// One line chart: a series per subject, `x` and `y` already transformed (log or linear).
struct Chart<'a> {
    left: f64,
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    /// (position, label) ticks in data units after transformation.
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
    series: Vec<(Subject, Vec<(f64, f64)>)>,
}

const CHART_W: f64 = 440.0;
const CHART_H: f64 = 300.0;
const TOP: f64 = 60.0;

fn draw(out: &mut String, chart: &Chart<'_>) {
    let (x0, x1) = span(chart.x_ticks.iter().map(|t| t.0));
    let (y0, y1) = span(chart.y_ticks.iter().map(|t| t.0));
    let px = |x: f64| chart.left + (x - x0) / (x1 - x0) * CHART_W;
    let py = |y: f64| TOP + CHART_H - (y - y0) / (y1 - y0) * CHART_H;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="14" font-weight="bold" text-anchor="middle">{}</text>"#,
        chart.left + CHART_W / 2.0,
        TOP - 20.0,
        chart.title
    );
    let _ = writeln!(
        out,
        r##"<rect x="{}" y="{TOP}" width="{CHART_W}" height="{CHART_H}" fill="none" stroke="#999"/>"##,
        chart.left
    );
    for (x, label) in &chart.x_ticks {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}" font-size="11" text-anchor="middle">{label}</text>"##,
            px(*x),
            TOP + CHART_H,
            TOP + CHART_H + 15.0
        );
    }
    for (y, label) in &chart.y_ticks {
        let _ = writeln!(
            out,
            r##"<line x1="{0}" y1="{1:.1}" x2="{2}" y2="{1:.1}" stroke="#eee"/><text x="{3}" y="{4:.1}" font-size="11" text-anchor="end">{label}</text>"##,
            chart.left,
            py(*y),
            chart.left + CHART_W,
            chart.left - 5.0,
            py(*y) + 4.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
        chart.left + CHART_W / 2.0,
        TOP + CHART_H + 35.0,
        chart.x_label
    );
    let _ = writeln!(
        out,
        r#"<text x="{0}" y="{1}" font-size="12" text-anchor="middle" transform="rotate(-90 {0} {1})">{2}</text>"#,
        chart.left - 45.0,
        TOP + CHART_H / 2.0,
        chart.y_label
    );
    for (subject, points) in &chart.series {
        let (colour, dash) = subject.style();
        let path: Vec<String> = points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"><title>{}</title></polyline>"#,
            path.join(" "),
            subject.name()
        );
        for point in &path {
            let (x, y) = point.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(
                out,
                r#"<circle cx="{x}" cy="{y}" r="2.5" fill="{colour}"/>"#
            );
        }
    }
}

fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// Ticks at powers of ten covering `max` (log10 positions).
fn log_ticks(max: f64) -> Vec<(f64, String)> {
    let top = max.max(1.0).log10().ceil().max(1.0) as i32;
    (0..=top)
        .map(|e| (f64::from(e), format!("{}", 10f64.powi(e))))
        .collect()
}

fn svg(rows: &[Row], sizes: &[usize], server: &str) -> String {
    let send_series: Vec<(Subject, Vec<(f64, f64)>)> = subjects()
        .into_iter()
        .map(|subject| {
            let points = rows
                .iter()
                .filter(|row| {
                    row.subject == subject && row.operation == "send" && !row.commands.is_empty()
                })
                .map(|row| {
                    (
                        (row.n as f64).log10(),
                        row.commands_median().max(1.0).log10(),
                    )
                })
                .collect();
            (subject, points)
        })
        .collect();
    let max_commands = rows
        .iter()
        .filter(|row| row.operation == "send")
        .map(Row::commands_median)
        .fold(1.0, f64::max);
    let max_n = sizes.iter().copied().max().unwrap_or(1000) as f64;

    let read_series: Vec<(Subject, Vec<(f64, f64)>)> = subjects()
        .into_iter()
        .map(|subject| {
            let points = rows
                .iter()
                .filter(|row| {
                    row.subject == subject && row.operation == "read" && !row.millis.is_empty()
                })
                .map(|row| (row.n as f64, row.millis_median()))
                .collect();
            (subject, points)
        })
        .collect();
    let max_millis = rows
        .iter()
        .filter(|row| row.operation == "read")
        .map(Row::millis_median)
        .filter(|m| m.is_finite())
        .fold(0.0, f64::max);
    let step = nice_step(max_millis / 5.0);
    let y_top = (max_millis / step).ceil().max(1.0) * step;
    let y_ticks = (0..=((y_top / step).round() as usize))
        .map(|i| {
            let v = i as f64 * step;
            (v, format!("{v}"))
        })
        .collect();
    let max_read = READ_SIZES.iter().copied().max().unwrap_or(500);
    let x_ticks = (0..=max_read / 100)
        .map(|i| ((i * 100) as f64, format!("{}", i * 100)))
        .collect();

    let mut out = String::new();
    let width = 2.0 * CHART_W + 200.0 + 190.0;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="470" font-family="sans-serif">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="10" y="18" font-size="12">server: {} (FerretDB figures are not MongoDB's)</text>"#,
        xml_escape(server)
    );
    draw(
        &mut out,
        &Chart {
            left: 70.0,
            title: "Commands per send vs recipients N",
            x_label: "recipients N (log scale)",
            y_label: "commands per send (log scale)",
            x_ticks: log_ticks(max_n),
            y_ticks: log_ticks(max_commands),
            series: send_series,
        },
    );
    draw(
        &mut out,
        &Chart {
            left: 70.0 + CHART_W + 120.0,
            title: "Read latency vs messages read (inbox of 1000)",
            x_label: "newest messages read",
            y_label: "median latency (ms)",
            x_ticks,
            y_ticks,
            series: read_series,
        },
    );
    let legend_x = 2.0 * CHART_W + 200.0;
    for (i, subject) in subjects().into_iter().enumerate() {
        let (colour, dash) = subject.style();
        let y = TOP + 10.0 + i as f64 * 20.0;
        let _ = writeln!(
            out,
            r#"<line x1="{legend_x}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            legend_x + 25.0,
            legend_x + 30.0,
            y + 4.0,
            subject.name()
        );
    }
    out.push_str("</svg>\n");
    out
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * power)
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
