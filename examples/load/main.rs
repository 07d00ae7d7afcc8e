//! The sustained-load benchmark: concurrent clients for a fixed time doing a realistic mix of
//! inbox, comment and vote operations against one server, reporting per operation the
//! throughput and the p50/p95/p99 latency, and at the end checking that nothing was lost or
//! duplicated. Run it against your own server:
//!
//! ```text
//! cargo run --release --example load                                  # 16 clients, 60 s, 200 users
//! MONGODB_URI=mongodb://127.0.0.1:27017/ cargo run --release --example load
//! MONGO_SOCIAL_SERVER=documentdb cargo run --release --example load   # the fixture's FerretDB 2
//! LOAD_FAULT=1 cargo run --release --example load                     # a 3 s outage at half time
//! LOAD_INBOX=fan-out-on-write LOAD_COMMENTS=hybrid-pages LOAD_SECONDS=30 cargo run --release --example load
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts the fixture's private server
//! (`MONGO_SOCIAL_SERVER`: `ferretdb`, the default, `mongo-java-server` or `documentdb`).
//! **It drops the database `LOAD_DATABASE` (`ms_load`) first**, and leaves what it wrote there.
//!
//! # What it does
//!
//! 1. Drops the database, creates the stores' indexes, sends every user `LOAD_SEED_MESSAGES`
//!    messages (in groups of up to 10 recipients) and posts `LOAD_SEED_COMMENTS` comments to
//!    each of `LOAD_DISCUSSIONS` discussions.
//! 2. Runs `LOAD_CLIENTS` tokio tasks for `LOAD_SECONDS`, all on one `mongodb::Client` (built
//!    with the stores' own `RetryPolicy` applied to its options, `apply_to`, as the crate
//!    advises; the driver's default pool of 10 connections is shared, as in an application).
//!    Users are shared out among the clients, so each user's calls are made one after
//!    another. Each client, with its own random numbers, first makes one call of every kind
//!    (finishing that round even past the deadline), then picks by the mix (`LOAD_MIX`, default
//!    `pages=45,unread=15,send=20,mark=5,comments=10,votes=5`):
//!    - **pages**: the user's newest inbox page of `LOAD_PAGE` (50); a quarter of the time,
//!      when the last page the user read has a cursor, the page after it (`inbox next page`);
//!    - **unread**: the user's unread count;
//!    - **send**: a message from the user to 1 to `LOAD_MAX_RECIPIENTS` (100) other users,
//!      log-uniform (as many sends to 1-9 recipients as to 10-99; median 10, mean about 21);
//!    - **mark**: half `mark_read` of a message of the last page the user read, half
//!      `mark_read_up_to` that message or that page's cursor (a user who has read no page yet
//!      reads one instead);
//!    - **comments**: half a top-level comment by the user on a random discussion, half a page
//!      of `LOAD_PAGE` of a discussion's comments, oldest or newest first;
//!    - **votes**: the user votes up or down (or, 15 % of the time, takes their vote back) on a
//!      comment the client knows (seeded, posted, or seen in a page).
//!
//!    Every call is timed from the call to its result, failed calls included, and recorded
//!    (operation, start, latency, error kind). Progress goes to stderr every 5 seconds.
//! 3. Prints, on stdout, a Markdown table: per operation (sends also by number of recipients)
//!    the count, ops/s over `LOAD_SECONDS`, p50, p95, p99 and max latency in milliseconds, and
//!    the errors by kind ([`mongo_social::Error::kind`]); then the total, and the commands the
//!    calls sent (from the driver's command monitoring), by name and per call.
//! 4. Checks, on a fresh client to the server directly, that nothing was lost or duplicated
//!    (`check.rs`): every acknowledged send once in each recipient's inbox and a failed one at
//!    most once, every acknowledged comment once and a failed one at most once, every comment's
//!    vote counts equal to what its voters' acknowledged (and possibly landed failed) votes
//!    leave, every `count` equal to what the pages hold. Read state is not checked. It prints
//!    the counts and exits with status 1 if anything was lost, duplicated or miscounted.
//! 5. Writes the picture to `LOAD_SVG`: per second, p50 and p99 of sends and of inbox pages
//!    (log scale), the calls completed and the errors per second, the outage shaded.
//!
//! With `LOAD_FAULT` set, the client connects through the fixture's `FaultProxy` (a loopback
//! TCP proxy, which adds a hop of its own; the server URI must name one host), and at half time
//! the proxy cuts every connection and refuses new ones for `LOAD_OUTAGE_SECONDS`; the report
//! gives the window, the proxy's counters, and the calls in flight at the cut, made during the
//! outage, and made at other times. The check still goes to the server directly.
//!
//! # Settings (environment variables)
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `LOAD_CLIENTS` | 16 | concurrent clients (tokio tasks) |
//! | `LOAD_SECONDS` | 60 | how long the clients make calls (seconds, fractions allowed) |
//! | `LOAD_USERS` | 200 | users (at least 2, and one per client) |
//! | `LOAD_INBOX` | `bucketed-fan-out` | inbox strategy: `bucketed-fan-out`, `fan-out-on-write`, `fan-out-on-read` |
//! | `LOAD_COMMENTS` | `per-comment` | comment strategy: `per-comment`, `embedded`, `hybrid-pages` |
//! | `LOAD_MIX` | `pages=45,unread=15,send=20,mark=5,comments=10,votes=5` | the weights of the mix (left out: 0) |
//! | `LOAD_FAULT` | unset | set (to anything but `0` or empty): the outage at half time, through the fault proxy |
//! | `LOAD_OUTAGE_SECONDS` | 3 | the outage's length, with `LOAD_FAULT` |
//! | `LOAD_SVG` | `target/load/load.svg` | where to write the picture (empty: none) |
//! | `LOAD_SEED` | 1 | the seed of the clients' random numbers (SplitMix64) |
//! | `LOAD_PAGE` | 50 | messages and comments per page read |
//! | `LOAD_SEED_MESSAGES` | 20 | messages in every inbox before the run |
//! | `LOAD_DISCUSSIONS` | 10 | discussions |
//! | `LOAD_SEED_COMMENTS` | 20 | comments in every discussion before the run |
//! | `LOAD_MAX_RECIPIENTS` | 100 | the most recipients of one send |
//! | `LOAD_DATABASE` | `ms_load` | the database (dropped first) |
//! | `LOAD_RETRY_BUDGET` | 10 | the stores' retry budget (seconds), which also caps the client's server selection and connect timeouts: shorter than the outage, calls fail during it |
//!
//! The same core runs, small, in `tests/load.rs`, with and without the outage.

mod check;
mod report;
mod run;
mod svg;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use mongo_social::retry::RetryPolicy;
use run::{BoxResult, Config, Mix};

/// `var` parsed, or `default` when unset or empty.
fn setting<T: std::str::FromStr>(var: &str, default: T) -> BoxResult<T> {
    match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => value
            .trim()
            .parse()
            .map_err(|_| format!("{var} cannot be {value:?}").into()),
        _ => Ok(default),
    }
}

fn seconds(var: &str, default: f64) -> BoxResult<Duration> {
    let value: f64 = setting(var, default)?;
    Duration::try_from_secs_f64(value).map_err(|_| format!("{var} cannot be {value}").into())
}

fn config() -> BoxResult<Config> {
    let defaults = Config::default();
    let fault = std::env::var("LOAD_FAULT").is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0");
    Ok(Config {
        clients: setting("LOAD_CLIENTS", defaults.clients)?,
        duration: seconds("LOAD_SECONDS", defaults.duration.as_secs_f64())?,
        users: setting("LOAD_USERS", defaults.users)?,
        inbox: match std::env::var("LOAD_INBOX") {
            Ok(name) if !name.is_empty() => run::inbox_strategy(&name)?,
            _ => defaults.inbox,
        },
        comments: match std::env::var("LOAD_COMMENTS") {
            Ok(name) if !name.is_empty() => run::comment_strategy(&name)?,
            _ => defaults.comments,
        },
        mix: match std::env::var("LOAD_MIX") {
            Ok(text) if !text.trim().is_empty() => Mix::parse(&text)?,
            _ => defaults.mix,
        },
        seed: setting("LOAD_SEED", defaults.seed)?,
        fault: if fault {
            Some(seconds("LOAD_OUTAGE_SECONDS", 3.0)?)
        } else {
            None
        },
        page: setting("LOAD_PAGE", defaults.page)?,
        seed_messages: setting("LOAD_SEED_MESSAGES", defaults.seed_messages)?,
        discussions: setting("LOAD_DISCUSSIONS", defaults.discussions)?,
        seed_comments: setting("LOAD_SEED_COMMENTS", defaults.seed_comments)?,
        max_recipients: setting("LOAD_MAX_RECIPIENTS", defaults.max_recipients)?,
        database: setting("LOAD_DATABASE", defaults.database)?,
        progress: defaults.progress,
        retry: RetryPolicy::default().budget(seconds("LOAD_RETRY_BUDGET", 10.0)?),
    })
}

#[tokio::main]
async fn main() -> BoxResult<ExitCode> {
    let config = config()?;
    let svg_path = std::env::var("LOAD_SVG").unwrap_or_else(|_| "target/load/load.svg".into());
    let settings = format!(
        "{} clients, {:.0} s, {} users, inbox {}, comments {}, mix {}, seed {}, pages of {}, \
         retry budget {:.1} s{}",
        config.clients,
        config.duration.as_secs_f64(),
        config.users,
        config.inbox,
        config.comments,
        config.mix,
        config.seed,
        config.page,
        config.retry.max_elapsed().as_secs_f64(),
        match config.fault {
            Some(length) => format!(", outage of {:.1} s at half time", length.as_secs_f64()),
            None => String::new(),
        }
    );
    eprintln!("load: {settings}");
    let outcome = run::run(&config).await?;
    println!("server: {}", outcome.server);
    println!("settings: {settings}");
    println!(
        "setup (drop, indexes, seeding): {:.1} s; calls made for {:.1} s, the last one in flight \
         returned at {:.1} s\n",
        outcome.setup.as_secs_f64(),
        outcome.duration.as_secs_f64(),
        outcome.drained.as_secs_f64()
    );
    println!("{}", report::table(&outcome));
    println!("{}\n", report::commands(&outcome));
    if let Some(summary) = report::outage_summary(&outcome) {
        println!("{summary}\n");
    }
    if !outcome.error_examples.is_empty() {
        println!("first error of each operation and kind:");
        for (op, kind, message) in &outcome.error_examples {
            println!("- {} ({kind}): {message}", op.name());
        }
        println!();
    }
    if !svg_path.is_empty() {
        let path = Path::new(&svg_path);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let title = [
            format!("server: {}", outcome.server),
            format!("load: {settings}"),
        ];
        std::fs::write(path, svg::render(&outcome, &title))?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!("checking every inbox and discussion...");
    let checking = std::time::Instant::now();
    let verdict = check::check(&config, &outcome.ledger).await?;
    println!("{verdict}");
    println!("(checked in {:.1} s)", checking.elapsed().as_secs_f64());
    Ok(if verdict.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
