//! Observability through [`tracing`](https://docs.rs/tracing): what each operation sent, how
//! long it took, and every retry, lock wait, job and fallback along the way.
//!
//! Everything here is behind the `tracing` feature, off by default:
//!
//! ```toml
//! [dependencies]
//! mongo-social = { version = "0.1", features = ["tracing"] }
//! ```
//!
//! Without it, the crate emits nothing and the calls that would emit compile to nothing (the
//! operations' futures are returned as they are); [`attach`] leaves a client's options as they
//! are, and the feature adds no crate: a build without it and without the default
//! `dns-resolver` feature has no `tracing` in its dependency tree (CI checks it). With
//! `dns-resolver` (on by default, for `mongodb+srv://` addresses) the driver's DNS resolver,
//! `hickory-resolver`, brings `tracing` in on its own account.
//!
//! # What is emitted
//!
//! **One span per public store operation**, at `debug`, named `store.operation`: `inbox.send`,
//! `inbox.page` (`inbox_page`), `inbox.mark_read`, ... for every [`InboxStore`](crate::InboxStore)
//! and [`InboxLifecycle`](crate::inbox::InboxLifecycle) operation of every strategy; `graph.follow`,
//! `feed.posts.create`, `feed.users.rename`, `feed.likes.like`, `feed.feeds.page`,
//! `feed.search.page`, `notifications.notify`, `notifications.outbox.run_pending`,
//! `delivery.post`, `jobs.enqueue`, `jobs.run_pending`, and so on for each public `async`
//! method of [`FollowGraph`](crate::graph::FollowGraph), [`FeedStore`](crate::FeedStore) and its
//! parts, [`NotificationStore`](crate::NotificationStore) and its outbox,
//! [`Delivery`](crate::Delivery) and [`JobQueue`](crate::jobs::JobQueue);
//! `comments.post`, `comments.chronological`, `comments.vote`, `comments.ranked`,
//! `comments.reply`, `comments.thread_page`, `comments.sub_thread`, `comments.ranked_thread`,
//! ... for every [`CommentStore`](crate::CommentStore),
//! [`VotedComments`](crate::comments::VotedComments) and
//! [`ThreadedComments`](crate::comments::ThreadedComments) operation of every comment strategy (named
//! after the trait's method); the transfers' `comments.discussions`, `comments.export`,
//! `comments.import`, `comments.purge`, `comments.purge_all`
//! ([`CommentTransfer`](crate::comments::CommentTransfer)) and `inbox.owners`,
//! `inbox.export`, `inbox.import`, `inbox.purge`, `inbox.purge_all`
//! ([`InboxTransfer`](crate::inbox::InboxTransfer)); and the migrations'
//! ([`migrate`](crate::migrate)) `migrate.start`, `migrate.run_pending`, `migrate.progress`,
//! `migrate.cut_over`, `migrate.finish`, `migrate.abort`, of
//! [`InboxMigration`](crate::migrate::InboxMigration) and
//! [`CommentMigration`](crate::migrate::CommentMigration) alike, and `migrate.copy`, the copy
//! of one owner or discussion as the migration's job runs it (inside that job's `jobs.run`).
//!
//! The stores of a running migration ([`MigratingInbox`](crate::migrate::MigratingInbox),
//! [`MigratingComments`](crate::migrate::MigratingComments)) have spans of their own, named
//! `migrate.inbox.<operation>` and `migrate.comments.<operation>` (`migrate.inbox.send`,
//! `migrate.inbox.page`, `migrate.comments.post`, ...), with the source's and the target's
//! `inbox.*` or `comments.*` spans inside. One operation of the application's is then one span,
//! which counts every command it cost (the migration's state reads, the source's write, the
//! target's, even where that is a [`send_stamped`](crate::inbox::InboxTransfer::send_stamped),
//! which has no span of its own) and whose outcome is what the application got; the inner
//! spans, with their strategies, say which store did what. The inner stores' spans alone would
//! leave the state reads uncounted and a mirrored write as two unrelated spans.
//!
//! A span's target is
//! the module that opens it (`mongo_social::inbox` for every inbox store's,
//! `mongo_social::comments` for every comment store's, `mongo_social::graph::...`), so
//! `RUST_LOG=mongo_social=debug` takes them all and `RUST_LOG=mongo_social::graph=debug` one
//! module's. Its fields:
//!
//! | field | what |
//! |---|---|
//! | `strategy` | the inbox strategy ([`inbox::Strategy::name`](crate::inbox::Strategy::name): `fan-out-on-read`, ...), or the comment strategy ([`comments::Strategy::name`](crate::comments::Strategy::name): `per-comment`, `embedded`, `hybrid-pages`) |
//! | `recipients`, `limit` | how many recipients a send or delivery names; a page's limit |
//! | `items` | how many messages or comments an import was given; how many a `migrate.copy` copied (recorded when it ends; empty when the unit was copied already, or the copy stopped) |
//! | `migration` | a migration's kind: `inbox` ([`InboxMigration`](crate::migrate::InboxMigration)) or `comments` ([`CommentMigration`](crate::migrate::CommentMigration)) |
//! | `kind` | a job's kind, as the application named it |
//! | `commands` | how many commands the operation sent, counted as [`attach`] says; empty without it |
//! | `outcome` | `ok`, or the failure's [`Error::kind`](crate::Error::kind) (`invalid_input`, `unreachable`, ...) |
//!
//! User ids, discussion ids, comments' links, payloads and filters are never recorded; ids the library made are, where they let
//! background work be followed (a job's id, the id of a post being delivered). An operation
//! that runs another (a delivery job sending to inboxes) holds the other's span as its child,
//! and counts its commands too.
//!
//! **Events**, in the span of the operation they belong to:
//!
//! | event | level | fields |
//! |---|---|---|
//! | a retry after a transient failure | `info` | `operation`, `attempt` (the one that failed, from 1), `error` (its kind), `code` (the server's error code) or `label` (the driver's error label), `delay_ms` |
//! | giving up at the end of the retry budget | `warn` | `operation`, `attempts`, `error` |
//! | waiting for lease locks held by another writer | `debug` (`info` after 16 waits) | `keys`, `waits` |
//! | taking over locks whose holder's lease ran out | `warn` | `keys` |
//! | a release deferred by an outage, then done in the background | `warn`, then `info` | `keys` |
//! | jobs claimed by a round | `debug` | `jobs` (their ids, comma-separated), `claimed` |
//! | a job finished, or handed back unrun (its claim's lease ending) | `debug` | `job`, `kind` |
//! | a job failed | `warn` | `job`, `kind`, `attempt`, `error`, `given_up`, `retry_in_ms` |
//! | a worker's round failed (it backs off) | `warn` | `worker`, `error` |
//! | a page of a post's followers delivered ([`Delivery`](crate::Delivery)'s fan-out job) | `debug` | `post` (the post's message id, shared by every page's job), `followers`, `delivered`, `first_page`, `last_page` |
//! | the server detected | `debug`, once per store | `server` (`mongodb`, `ferretdb` for 1.x, `documentdb` for DocumentDB and FerretDB 2.x, `mongo-java-server`, `other`), `version` |
//! | server capabilities missing, so fallback paths are used | `info`, once per detection (once per store) | `missing` ([`Capabilities::missing`](crate::server::Capabilities::missing), comma-separated), `server`, `version` |
//!
//! **Background work**: each job run is a `jobs.run` span whose `job` field is the job's id,
//! with its `kind`, `attempt` (from 1) and, when a worker started by
//! [`JobQueue::start_worker`](crate::jobs::JobQueue::start_worker) runs it, the worker's
//! `worker` number (one per worker in the process, from 1). Everything the handler does (a
//! delivery's inbox writes, their retries, their lock waits) is inside it, so one job can be
//! followed across its retries and the workers that ran it: filter on `jobs.run{job=...}`.
//! A worker has no span of its own: a span as long as the worker would make, in OpenTelemetry,
//! one trace that never ends; a worker's `jobs.run` spans are roots instead, one trace per job
//! run. An idle worker's polls emit nothing.
//!
//! The happy path emits nothing at `info` or above: operations are `debug`, retries and
//! fallbacks `info`, failures and give-ups `warn`.
//!
//! # Seeing it
//!
//! With [`tracing-subscriber`](https://docs.rs/tracing-subscriber) (its `env-filter` feature)
//! and `RUST_LOG=mongo_social=debug`:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use mongodb::options::ClientOptions;
//! use tracing_subscriber::{fmt::format::FmtSpan, EnvFilter};
//!
//! tracing_subscriber::fmt()
//!     .with_env_filter(EnvFilter::from_default_env()) // RUST_LOG=mongo_social=debug
//!     .with_span_events(FmtSpan::CLOSE) // a line per span as it ends, with its time
//!     .init();
//!
//! let mut options = ClientOptions::parse("mongodb://127.0.0.1:27017").await?;
//! mongo_social::observe::attach(&mut options); // count each operation's commands
//! let client = mongodb::Client::with_options(options)?;
//! # Ok(()) }
//! ```
//!
//! `RUST_LOG=mongo_social=info` shows retries, fallbacks and failures only;
//! `RUST_LOG=mongo_social[inbox.send]=debug` one operation's spans.
//!
//! # To OpenTelemetry
//!
//! [`tracing-opentelemetry`](https://docs.rs/tracing-opentelemetry) carries the same spans to
//! any OpenTelemetry backend (Jaeger, Tempo, Honeycomb, ...): add its layer beside (or instead
//! of) the fmt layer, with a tracer from the exporter of your choice. The shape, with the
//! `opentelemetry`, `opentelemetry_sdk`, `opentelemetry-otlp` and `tracing-opentelemetry`
//! crates of matching versions:
//!
//! ```ignore
//! use opentelemetry::trace::TracerProvider as _;
//! use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, EnvFilter};
//!
//! let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?;
//! let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
//!     .with_batch_exporter(exporter)
//!     .build();
//! tracing_subscriber::registry()
//!     .with(EnvFilter::new("mongo_social=debug"))
//!     .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("my-app")))
//!     .init();
//! ```
//!
//! Each operation's span becomes an OpenTelemetry span with its fields as attributes, and the
//! events become span events.
//!
//! # Cost
//!
//! Without the feature, none: the spans and events are not compiled in. With it, each operation
//! boxes its future (one allocation: operations nest, and their futures would otherwise grow
//! with every level), and a span that no subscriber wants (filtered out by level or target)
//! costs one check more; its field values are not computed, and its commands count for an
//! enclosing operation that is wanted.
//!
//! # Counting commands
//!
//! The library does not build the application's [`Client`](mongodb::Client), so it cannot see
//! its commands unless asked: [`attach`] adds a command event handler to the client's options
//! that counts each command an operation starts. The driver calls that handler synchronously,
//! in the task that sends the command, while the operation's future is polled; so each command
//! is counted by the operation running in that task (a task-local counter, set for the duration
//! of the operation's future), and concurrent operations on one client do not count each
//! other's. An operation that runs another counts the other's commands too.
//!
//! Not counted: the commands the driver sends by itself (handshakes, authentication,
//! monitoring: [`IGNORED_COMMANDS`]) and the capability probes', which `mongo-social-testing`'s
//! `CommandCounter` leaves out too; and, unlike that counter (which records every command its
//! client sends), a command sent from another task: a `killCursors` the driver sends in the
//! background after a cursor is dropped early. `commands` is recorded once [`attach`] has been
//! called in the process (an operation on a client without it then records 0), and left empty
//! before.

#[cfg(feature = "tracing")]
mod enabled;
pub(crate) mod spans;

use std::future::Future;

use mongodb::event::command::CommandStartedEvent;
use mongodb::options::ClientOptions;

use crate::error::Result;
use crate::server::PROBE_COLLECTION_PREFIX;

/// Commands that are not counted as an operation's (by [`attach`]'s handler, and by
/// `mongo-social-testing`'s `CommandCounter`): connection handshakes, authentication, liveness
/// checks and session cleanup, none of which an operation chooses to send.
///
/// Names are compared ignoring ASCII case. `killCursors` and `getMore` are real round trips and
/// are counted.
pub const IGNORED_COMMANDS: &[&str] = &[
    "hello",
    "isMaster",
    "saslStart",
    "saslContinue",
    "endSessions",
    "ping",
    "buildInfo",
];

/// Whether a command with this name is counted (it is not one of [`IGNORED_COMMANDS`]).
///
/// ```
/// assert!(mongo_social::observe::is_counted_name("find"));
/// assert!(!mongo_social::observe::is_counted_name("isMaster"));
/// ```
pub fn is_counted_name(command_name: &str) -> bool {
    !IGNORED_COMMANDS
        .iter()
        .any(|ignored| ignored.eq_ignore_ascii_case(command_name))
}

/// Whether a started command counts as an operation's: not one of [`IGNORED_COMMANDS`], and not
/// a capability probe's (on a collection named [`PROBE_COLLECTION_PREFIX`]...), which detection
/// sends, like `buildInfo`, once per store. For a command event handler of one's own that counts
/// what [`attach`] counts (as `mongo-social-testing`'s `CommandCounter` does).
pub fn is_counted(started: &CommandStartedEvent) -> bool {
    let probe = started
        .command
        .iter()
        .next()
        .and_then(|(_, target)| target.as_str())
        .is_some_and(|target| target.starts_with(PROBE_COLLECTION_PREFIX));
    !probe && is_counted_name(&started.command_name)
}

/// Counts the commands of each operation on the client built from `options`, for its span's
/// `commands` field (see [Counting commands](self#counting-commands)). Call it last, after any
/// other command event handler is set: the handler that was there is kept, and is given every
/// event after this one has looked at it.
///
/// Without the `tracing` feature, it does nothing.
///
/// ```
/// use mongodb::options::ClientOptions;
///
/// let mut options = ClientOptions::default();
/// mongo_social::observe::attach(&mut options);
/// # #[cfg(feature = "tracing")]
/// assert!(options.command_event_handler.is_some());
/// ```
pub fn attach(options: &mut ClientOptions) {
    #[cfg(feature = "tracing")]
    enabled::attach(options);
    #[cfg(not(feature = "tracing"))]
    let _ = options;
}

#[cfg(feature = "tracing")]
pub(crate) use enabled::{current, label, worker, worker_number, Operation};

/// The span of one public operation, `$name` (a literal, `"store.operation"`), with the fields
/// given in `tracing`'s syntax after it: `operation!("inbox.send", strategy = NAME, recipients =
/// n).run(future)`. `commands` and `outcome` are added and recorded by [`Operation::run`].
#[cfg(feature = "tracing")]
macro_rules! operation {
    (target: $target:expr, $name:expr $(, $($fields:tt)*)?) => {
        $crate::observe::Operation::new(::tracing::debug_span!(
            target: $target,
            $name,
            commands = ::tracing::field::Empty,
            outcome = ::tracing::field::Empty,
            $($($fields)*)?
        ))
    };
    ($name:expr $(, $($fields:tt)*)?) => {
        $crate::observe::Operation::new(::tracing::debug_span!(
            $name,
            commands = ::tracing::field::Empty,
            outcome = ::tracing::field::Empty,
            $($($fields)*)?
        ))
    };
}

/// An event at `$level` (`debug`, `info`, `warn`), in `tracing`'s syntax.
#[cfg(feature = "tracing")]
macro_rules! event {
    ($level:ident, $($rest:tt)+) => {
        ::tracing::$level!($($rest)+)
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! operation {
    ($($rest:tt)*) => {
        $crate::observe::Operation
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! event {
    ($($rest:tt)*) => {};
}

/// The span of operation `$name` (a literal: `"send"`) of `$engine`, a store's engine (a trait
/// object, with `migrating()` and `strategy()`) in store `$store` (`"inbox"`): `<store>.<name>`
/// with the strategy's name for a strategy's store, `migrate.<store>.<name>` for a running
/// migration's (whose inner stores' spans carry the strategies); `$fields` as `tracing` takes
/// them; the span's target is `mongo_social::<store>`. The inbox and comment stores open every
/// span of their operations through it.
macro_rules! store_operation {
    ($store:literal, $engine:expr, $name:literal $(, $($fields:tt)*)?) => {{
        let engine = $engine;
        if engine.migrating() {
            $crate::observe::operation!(
                target: concat!("mongo_social::", $store),
                concat!("migrate.", $store, ".", $name)
                $(, $($fields)*)?
            )
        } else {
            $crate::observe::operation!(
                target: concat!("mongo_social::", $store),
                concat!($store, ".", $name),
                strategy = engine.strategy().name()
                $(, $($fields)*)?
            )
        }
    }};
}

pub(crate) use {event, operation, store_operation};

impl Operation {
    /// `work` given what `checked` holds, run in this span; `checked`'s error otherwise (recorded
    /// as the span's outcome), and `work` never runs. The stores' fronts check their input with
    /// it, so bad input sends no command.
    pub(crate) async fn run_checked<C, T, W>(
        self,
        checked: Result<C>,
        work: impl FnOnce(C) -> W,
    ) -> Result<T>
    where
        W: Future<Output = Result<T>>,
    {
        self.run(async move { work(checked?).await }).await
    }
}

/// Without the `tracing` feature: nothing, and [`Operation::run`] returns the future it is given.
#[cfg(not(feature = "tracing"))]
#[derive(Debug)]
pub(crate) struct Operation;

#[cfg(not(feature = "tracing"))]
impl Operation {
    /// `work`, as it is.
    #[inline(always)]
    pub(crate) fn run<F>(self, work: F) -> F {
        work
    }

    /// `work`, as it is.
    #[inline(always)]
    pub(crate) fn run_nested<F>(self, work: F) -> F {
        work
    }

    /// `work`, as it is.
    #[inline(always)]
    pub(crate) fn follow<F>(self, work: F) -> F {
        work
    }
}

/// Reports what detection found: at `debug` the server, and at `info` the capabilities it lacks,
/// for which the stores take fallback paths (see [`Capabilities`](crate::server::Capabilities)).
pub(crate) fn detected(
    info: &crate::server::ServerInfo,
    capabilities: &crate::server::Capabilities,
) {
    #[cfg(feature = "tracing")]
    {
        let server = info.family().name();
        let version = info.family_version();
        tracing::debug!(server, version, "server detected");
        let missing = capabilities.missing();
        if !missing.is_empty() {
            tracing::info!(
                missing = missing.join(", "),
                server,
                version,
                "the server lacks capabilities: their fallback paths are used"
            );
        }
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (info, capabilities);
}

/// Records `value` as the field `name` of the current operation's span, where the span declared
/// it (`name = ::tracing::field::Empty` in [`operation!`]): a count known only at the end (the
/// items a migration's copy of one unit copied). Without the `tracing` feature: nothing.
pub(crate) fn record(name: &'static str, value: u64) {
    #[cfg(feature = "tracing")]
    tracing::Span::current().record(name, value);
    #[cfg(not(feature = "tracing"))]
    let _ = (name, value);
}

/// Without the `tracing` feature: nothing.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn current() -> Operation {
    Operation
}

/// Without the `tracing` feature: `work`, as it is.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn worker<F>(work: F) -> F {
    work
}
