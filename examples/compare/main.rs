//! The evidence for choosing a strategy: the library's inbox and comment strategies
//! against the seed documents' literal algorithms, on the same server in the same run.
//!
//! ```text
//! cargo run --release --example compare                     # about 5 minutes on FerretDB
//! COMPARE_SCALE=full cargo run --release --example compare  # adds N = 10000
//! COMPARE_REPS=9 cargo run --release --example compare      # repetitions per figure (default 5)
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. For every subject a
//! [`CommandCounter`] on the client counts the commands of each operation, and latency is the
//! median wall-clock time of `COMPARE_REPS` timed repetitions after one untimed warm-up:
//!
//! - **Inboxes** (`inbox.rs`): the three strategies, the seed blog post's three designs
//!   (`benches/support/seed_baselines.rs`), and fan-out on read and on write written by hand
//!   with plain driver calls (the library's overhead):
//!   - `send` to N recipients (`COMPARE_SIZES`, default 1, 10, 100, 1000);
//!   - `newest 50` of an inbox as it grows through `COMPARE_INBOX_SIZES` messages (default 100,
//!     1000, 10000), which shows whether the read cost stays flat; `read newest` 50 / 100 / 500
//!     of an inbox of 1,000;
//!   - `8 senders` each sending 5 messages to 3 overlapping recipients at once (throughput),
//!     after which every inbox is counted;
//!   - storage per message from `collStats` (`size`, `totalIndexSize`) over the subject's
//!     collections, for sends to N <= 100 and for the inbox of 1,000.
//! - **Comments** (`comments.rs`): the three strategies and the MongoDB manual's three
//!   (`benches/support/seed_comments.rs`), in a discussion grown through
//!   `COMPARE_DISCUSSION_SIZES` comments (default 100, 400): the first and the last page of 50
//!   oldest first, and the last page of 50 in threaded order where the strategy has threads; at
//!   the largest size the storage per comment, a `post` and a `reply`.
//!
//! - **Growth** (`growth.rs`, only with `COMPARE_PARTS=growth`): each inbox strategy's newest 50,
//!   unread count and sends to 1 and 100 at one owner's inbox of `COMPARE_GROWTH_SIZES`
//!   messages (default 1,000 to 1,000,000, loaded in bulk in the store's own layout), printed
//!   as Markdown tables (`docs/CAPACITY.md`, "How costs grow with an inbox").
//!
//! Every subject uses its own database, dropped before and after use (on FerretDB 1.x every
//! query but `{_id: X}` scans its whole collection, so sharing one would measure the
//! neighbours). On servers without atomic updates, bucketed inboxes past 1,000 messages are
//! loaded in bulk but for their last message (`benches/support/bucket_load.rs` says why).
//!
//! Prints a table (subject × operation: commands and median latency, each also as a ratio to
//! the seed's design; no ratio where either figure had no warm-up) and writes
//! `target/compare/results.csv` and `target/compare/cost.svg`, four log-log panels: commands
//! per send against N, newest-50 latency against inbox size, and the last comment page's
//! latency and commands against discussion size. Latencies are reported, never asserted: they
//! depend on the machine and the server, and FerretDB figures are not MongoDB's.
//!
//! `COMPARE_PARTS=inbox` or `comments` runs one half; `COMPARE_ONLY=<text>` measures only the
//! subjects whose name contains it (several, comma-separated; `=<name>` for that name exactly:
//! `COMPARE_ONLY==fan-out-on-read,=bucketed-fan-out` leaves out the seeds' and hand-written
//! subjects); `COMPARE_BUDGET_S` (default 10) caps the time of one send
//! figure, giving fewer repetitions or skipping sizes predicted to take longer, and says so;
//! `COMPARE_COUNT_BUDGET_S` (300 with `COMPARE_SCALE=full`, else 0) lets a skipped send still
//! run once, untimed and without warm-up, to count its commands when it is predicted to take no
//! longer;
//! `COMPARE_TRACE=1` prints every timed operation's commands.

#[path = "../../benches/support/bucket_load.rs"]
mod bucket_load;
#[path = "../../benches/support/comment_subjects.rs"]
mod comment_subjects;
#[path = "../../benches/support/seed_baselines.rs"]
mod seed_baselines;
#[path = "../../benches/support/seed_comments.rs"]
mod seed_comments;

mod comments;
mod growth;
mod inbox;
mod report;
mod storage;

use std::future::Future;
use std::path::Path;
use std::time::Instant;

use mongo_social_lab::{self as testing, CommandCounter};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};

use report::{Panel, Row};

type BoxResult<T> = Result<T, comment_subjects::BoxError>;

/// What every measurement shares: the client and its command counter, and the settings.
pub struct Bench {
    client: Client,
    commands: CommandCounter,
    /// Timed repetitions per figure.
    reps: usize,
    /// Longest a send figure may take, all repetitions together (milliseconds).
    budget_ms: f64,
    /// Longest one untimed send, only to count its commands, may take (milliseconds).
    count_budget_ms: f64,
    /// Print every timed operation's commands.
    trace: bool,
    server: comment_subjects::Server,
    started: Instant,
}

impl Bench {
    /// A fresh (dropped) database for one subject's measurement.
    async fn fresh_db(&self, what: &str) -> BoxResult<Database> {
        let name = testing::database_name(&format!("cmp_{}", what.replace([' ', '-'], "_")));
        let db = self.client.database(&name);
        db.drop().await?;
        Ok(db)
    }

    /// Runs `operation` once; returns its wall-clock milliseconds and the commands it sent.
    async fn time<T>(
        &self,
        operation: impl Future<Output = BoxResult<T>>,
    ) -> BoxResult<(f64, usize)> {
        self.commands.reset();
        let started = Instant::now();
        operation.await?;
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        if self.trace {
            eprintln!("    {millis:.2} ms {:?}", self.commands.snapshot());
        }
        Ok((millis, self.commands.total()))
    }

    /// One line on stderr for a finished figure.
    fn progress(&self, row: &Row) {
        eprintln!(
            "  {:<32} {:<16} N={:<6} {:>6} commands {:>9} ms  ({:.0} s elapsed) {}",
            row.who.name,
            row.operation,
            row.n,
            report::show(row.commands_median(), 1, ""),
            report::show(row.millis_median(), 2, ""),
            self.started.elapsed().as_secs_f64(),
            row.skipped.as_deref().unwrap_or("")
        );
    }
}

/// `var` as a comma-separated list of positive numbers, or `default`.
fn sizes(var: &str, default: &[usize]) -> BoxResult<Vec<usize>> {
    let Ok(list) = std::env::var(var) else {
        return Ok(default.to_vec());
    };
    let mut sizes = list
        .split(',')
        .map(|n| match n.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{var} must be like 1,10,100, not {list:?}")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

/// `var` as a number, or `default`.
fn number<T: std::str::FromStr>(var: &str, default: T) -> BoxResult<T> {
    match std::env::var(var) {
        Ok(value) => value
            .trim()
            .parse()
            .map_err(|_| format!("{var} must be a number, not {value:?}").into()),
        Err(_) => Ok(default),
    }
}

#[tokio::main]
async fn main() -> BoxResult<()> {
    let full = std::env::var("COMPARE_SCALE").is_ok_and(|scale| scale == "full");
    let reps: usize = number("COMPARE_REPS", 5)?;
    if reps == 0 {
        return Err("COMPARE_REPS must be at least 1".into());
    }
    let budget_s: f64 = number("COMPARE_BUDGET_S", 10.0)?;
    let inbox_sizes = inbox::Sizes {
        recipients: sizes(
            "COMPARE_SIZES",
            if full {
                &[1, 10, 100, 1000, 10_000]
            } else {
                &[1, 10, 100, 1000]
            },
        )?,
        inboxes: sizes("COMPARE_INBOX_SIZES", &[100, 1000, 10_000])?,
    };
    let discussion_sizes = sizes("COMPARE_DISCUSSION_SIZES", &[100, 400])?;
    let parts = std::env::var("COMPARE_PARTS").unwrap_or_else(|_| "inbox,comments".to_owned());
    let only = std::env::var("COMPARE_ONLY").unwrap_or_default();

    let commands = CommandCounter::new();
    let mut options = ClientOptions::parse(testing::server_uri()).await?;
    options.server_selection_timeout = Some(testing::SERVER_SELECTION_TIMEOUT);
    commands.attach(&mut options);
    let client = Client::with_options(options)?;
    let info = mongo_social::server::ServerInfo::detect(&client).await?;
    let server = info.describe();
    println!("server: {server}");
    println!(
        "inboxes: sends to N = {:?} recipients; newest 50 of inboxes of {:?}; newest 50/100/500 \
         of 1000; 8 concurrent senders\ncomments: discussions of {discussion_sizes:?}\nmedian \
         of up to {reps} repetitions after one warm-up (fewer, or skipped, when a send figure \
         would take over {budget_s} s: see the reps column)\n",
        inbox_sizes.recipients, inbox_sizes.inboxes
    );
    let bench = Bench {
        client,
        commands,
        reps,
        budget_ms: budget_s * 1000.0,
        count_budget_ms: number("COMPARE_COUNT_BUDGET_S", if full { 300.0 } else { 0.0 })? * 1000.0,
        trace: std::env::var_os("COMPARE_TRACE").is_some(),
        server: comment_subjects::Server::of(&info),
        started: Instant::now(),
    };

    let mut rows = Vec::new();
    if parts.contains("inbox") {
        rows.extend(inbox::run(&bench, &inbox_sizes, &only).await?);
    }
    if parts.contains("comments") {
        rows.extend(comments::run(&bench, &discussion_sizes, &only).await?);
    }

    if parts.contains("growth") {
        let growth_sizes = sizes("COMPARE_GROWTH_SIZES", &[1000, 10_000, 100_000, 1_000_000])?;
        growth::run(&bench, &growth_sizes, &only).await?;
        if rows.is_empty() {
            return Ok(());
        }
    }
    if rows.is_empty() {
        return Err(format!(
            "nothing measured: COMPARE_ONLY={only:?} matches no subject of COMPARE_PARTS={parts:?}"
        )
        .into());
    }
    let operations: Vec<report::Operation> = inbox::OPERATIONS
        .into_iter()
        .chain(comments::OPERATIONS)
        .collect();
    report::print_table(&rows, &operations);
    report::print_overhead(&rows, &inbox::HAND_WRITTEN);

    let panels = [
        Panel {
            title: "Commands per send vs recipients",
            x_label: "recipients N",
            y_label: "commands per send",
            operation: inbox::SEND,
            commands: true,
        },
        Panel {
            title: "Newest 50 messages vs inbox size",
            x_label: "messages in the inbox",
            y_label: "median latency (ms)",
            operation: inbox::NEWEST_50,
            commands: false,
        },
        Panel {
            title: "Last page of 50 comments vs discussion size",
            x_label: "comments in the discussion",
            y_label: "median latency (ms)",
            operation: comments::PAGE_LAST,
            commands: false,
        },
        Panel {
            title: "Commands for the last page of 50 comments",
            x_label: "comments in the discussion",
            y_label: "commands per page",
            operation: comments::PAGE_LAST,
            commands: true,
        },
    ];
    let out = Path::new("target/compare");
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("results.csv"), report::csv(&rows, &server, reps))?;
    std::fs::write(out.join("cost.svg"), report::svg(&rows, &panels, &server))?;
    println!(
        "\nwrote {} and {} ({:.0} s of measurement)",
        out.join("results.csv").display(),
        out.join("cost.svg").display(),
        bench.started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Whether the subject `name` is one `COMPARE_ONLY` (`only`) selects: every subject when it is
/// empty, else those matching one of its comma-separated items (`=name` exactly, any other item
/// as a part of the name).
pub fn selected(name: &str, only: &str) -> bool {
    only.is_empty()
        || only.split(',').any(|item| match item.strip_prefix('=') {
            Some(exact) => name == exact,
            None => name.contains(item),
        })
}
