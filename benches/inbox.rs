//! The three inbox strategies head to head: sending, reading a page, and concurrent senders,
//! with the seed blog post's three designs (`benches/support/seed_baselines.rs`, implemented
//! literally with plain driver calls) as baselines in `send` and `inbox_page`.
//!
//! ```text
//! cargo bench --bench inbox                                   # local FerretDB, small sizes
//! MONGODB_URI=mongodb://127.0.0.1:27017/ MONGO_SOCIAL_BENCH_SCALE=full cargo bench --bench inbox
//! ```
//!
//! Groups (one database each, `mongo_social_bench_<group>`, dropped at the start; the seed
//! designs use fixed collection names, so each seed baseline gets its own database,
//! `mongo_social_bench_<group>_seed_<design>[_m<M>]`, dropped before it is used):
//!
//! - `send`: one message to N recipients (`fan-out-on-read/N`, ...). Throughput counts
//!   deliveries (N per send). Every sample starts from empty collections and one untimed send to
//!   the same recipients, so the timed sends are steady-state ones (buckets exist) and the sizes
//!   the strategies work on do not drift with the number of iterations criterion picks. The seed
//!   baselines (`seed fan-out-on-read/N`, `seed fan-out-on-write/N`, `seed bucketed/N`) are
//!   measured the same way through their own `send`. The seed's fan-out-on-write and bucketed
//!   sends cost N and 2N commands (a seed bucketed send to 100 recipients takes ~8 s on FerretDB),
//!   so by default the seeds run only for N <= 10 (`MONGO_SOCIAL_BENCH_SEED_SEND_MAX`); at
//!   `full` they run for every N.
//! - `inbox_page`: the newest 50 messages of an owner whose inbox holds M messages. Each
//!   (strategy, M) gets its own collections, filled once through the store's `send` before the
//!   group runs. Throughput counts the 50 messages a page returns. Each (seed baseline, M) is
//!   filled once the same way through the baseline's `send` (the seed's bucketed design one send
//!   at a time: its upserts have no unique index, so concurrent sends to one owner could
//!   duplicate its `users` count) and read with the baseline's `read(owner, 50)`. Past
//!   `MONGO_SOCIAL_BENCH_BUCKET_SEND_FILL_MAX` messages, bucketed inboxes (ours and the seed's)
//!   are instead loaded in bulk with the documents M - 1 sends would leave (full buckets and the
//!   head, or the seed's `users` count), and the last message is sent through `send`, which
//!   checks that the layout takes writes; the count is checked through the store either way.
//!   By default that happens only on servers without atomic updates (FerretDB 1.x), past 1,000
//!   messages: there every bucketed `send` scans the whole buckets collection, so filling
//!   through it grows with the square of M (about an hour for 10,000). The group samples flat.
//! - `concurrent_send`: 8 tasks each send k messages to 3 recipients that overlap with their
//!   neighbours' (pool of 8 users). Throughput counts messages (8k per iteration); every sample
//!   starts from empty collections and one untimed message per sender.
//!
//! Before each group, one line per (strategy, size) gives the commands one operation sent, as a
//! [`CommandCounter`] on the bench client saw them (seed baselines included); after each `send` and `concurrent_send`
//! benchmark, the average over every send it timed (including bucket rollovers).
//!
//! Sizes (defaults suit the local FerretDB, which scans whole collections for any filter but
//! `{_id: x}`; `full` is meant for a real MongoDB via `MONGODB_URI`):
//!
//! | variable | default | `MONGO_SOCIAL_BENCH_SCALE=full` |
//! |---|---|---|
//! | `MONGO_SOCIAL_BENCH_SEND` (recipients N) | `1,10,100` | `1,10,100,1000,10000` |
//! | `MONGO_SOCIAL_BENCH_SEED_SEND_MAX` (largest N for the seed baselines in `send`) | `10` | no limit |
//! | `MONGO_SOCIAL_BENCH_PAGE` (inbox size M) | `100,1000` | `1000,10000,100000` |
//! | `MONGO_SOCIAL_BENCH_BUCKET_SEND_FILL_MAX` (largest bucketed M filled through `send`) | no limit on MongoDB, `1000` without atomic updates | same |
//! | `MONGO_SOCIAL_BENCH_CONCURRENT` (k per sender) | `5` | `10,100` |
//! | `MONGO_SOCIAL_BENCH_FILL_TASKS` (concurrent sends while filling) | `4` | `16` |
//! | `MONGO_SOCIAL_BENCH_BUCKET_SIZE` | `50` | `50` |
//! | `MONGO_SOCIAL_BENCH_GROUPS` (which groups run) | all | all |
//!
//! Criterion defaults here are 10 samples, 1 s warm-up, 3 s measurement; the usual flags
//! (`--sample-size`, `--measurement-time`, `--warm-up-time`, a name filter) override them.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::Document;
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use futures::{StreamExt, TryStreamExt};
use mongo_social::inbox::Strategy;
use mongo_social::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, NewMessage, PageRequest,
};
use mongo_social_lab::CommandCounter;
use mongodb::{Client, Database};
use tokio::runtime::Runtime;

#[path = "support/bench_env.rs"]
mod bench_env;

#[path = "support/bucket_load.rs"]
mod bucket_load;

#[path = "support/seed_baselines.rs"]
mod seed_baselines;

use seed_baselines::SeedBaseline;

/// Messages per inbox page read in the `inbox_page` group.
const PAGE: usize = 50;
/// Concurrent senders in the `concurrent_send` group.
const SENDERS: usize = 8;
/// Recipients of each message in the `concurrent_send` group.
const RECIPIENTS_PER_MESSAGE: usize = 3;
/// The owner whose inbox the `inbox_page` group reads.
const OWNER: &str = "owner";

/// Sizes and switches, from the environment.
#[derive(Debug)]
struct Config {
    full: bool,
    send_n: Vec<u64>,
    /// The largest N the seed baselines run for in `send`; `None`: every N.
    seed_send_max: Option<u64>,
    page_m: Vec<u64>,
    /// The largest M a bucketed inbox (ours or the seed's) is filled to through `send` in
    /// `inbox_page`; `None`: the server decides (no limit where updates are atomic, 1,000
    /// elsewhere).
    bucket_send_fill_max: Option<u64>,
    concurrent_k: Vec<u64>,
    fill_tasks: usize,
    bucket_size: u32,
    groups: Option<Vec<String>>,
}

impl Config {
    fn from_env() -> Self {
        let full = match std::env::var("MONGO_SOCIAL_BENCH_SCALE").as_deref() {
            Ok("full") => true,
            Ok("" | "default") | Err(_) => false,
            Ok(other) => {
                panic!("MONGO_SOCIAL_BENCH_SCALE must be `full` or `default`, not {other:?}")
            }
        };
        let pick = |full_value: &[u64], default: &[u64]| {
            if full {
                full_value.to_vec()
            } else {
                default.to_vec()
            }
        };
        Self {
            full,
            send_n: bench_env::list(
                "MONGO_SOCIAL_BENCH_SEND",
                pick(&[1, 10, 100, 1000, 10_000], &[1, 10, 100]),
            ),
            seed_send_max: match std::env::var("MONGO_SOCIAL_BENCH_SEED_SEND_MAX") {
                Ok(value) if !value.trim().is_empty() => {
                    Some(bench_env::number("MONGO_SOCIAL_BENCH_SEED_SEND_MAX", 10) as u64)
                }
                _ => (!full).then_some(10),
            },
            page_m: bench_env::list(
                "MONGO_SOCIAL_BENCH_PAGE",
                pick(&[1000, 10_000, 100_000], &[100, 1000]),
            ),
            bucket_send_fill_max: match std::env::var("MONGO_SOCIAL_BENCH_BUCKET_SEND_FILL_MAX") {
                Ok(value) if !value.trim().is_empty() => {
                    Some(bench_env::number("MONGO_SOCIAL_BENCH_BUCKET_SEND_FILL_MAX", 1000) as u64)
                }
                _ => None,
            },
            concurrent_k: bench_env::list("MONGO_SOCIAL_BENCH_CONCURRENT", pick(&[10, 100], &[5])),
            fill_tasks: bench_env::number(
                "MONGO_SOCIAL_BENCH_FILL_TASKS",
                if full { 16 } else { 4 },
            ),
            bucket_size: bench_env::number(
                "MONGO_SOCIAL_BENCH_BUCKET_SIZE",
                mongo_social::inbox::DEFAULT_BUCKET_SIZE as usize,
            ) as u32,
            groups: bench_env::groups(),
        }
    }

    /// Whether the seed baselines run for N recipients in `send`.
    fn seeds_send(&self, n: u64) -> bool {
        self.seed_send_max.is_none_or(|max| n <= max)
    }

    fn runs(&self, group: &str) -> bool {
        bench_env::runs(&self.groups, group)
    }

    /// Whether a bucketed inbox of `m` messages is filled through `send` (else loaded in bulk,
    /// and only its last message sent). Without atomic updates (FerretDB 1.x) every bucketed
    /// `send` scans the whole buckets collection, so filling through it grows with the square of
    /// M: about an hour for 10,000 messages.
    fn buckets_sent(&self, m: u64, atomic_updates: bool) -> bool {
        match self.bucket_send_fill_max {
            Some(max) => m <= max,
            None => bucket_load::fill_through_send(m, atomic_updates),
        }
    }
}

/// What every group shares: the runtime, one client with a command counter, the sizes.
struct Env {
    rt: Runtime,
    client: Client,
    commands: CommandCounter,
    config: Config,
    /// Whether the server's single-document updates are atomic (MongoDB; not FerretDB 1.x).
    atomic_updates: bool,
}

impl Env {
    fn new() -> Self {
        let config = Config::from_env();
        let (rt, client, commands, info) = bench_env::connect();
        eprintln!(
            "server: {}; scale: {}; {config:?}",
            info.describe(),
            if config.full { "full" } else { "default" }
        );
        Self {
            rt,
            client,
            commands,
            config,
            atomic_updates: info.capabilities().atomic_updates,
        }
    }

    /// The group's database, dropped.
    fn database(&self, group: &str) -> Database {
        let db = self.client.database(&format!("mongo_social_bench_{group}"));
        self.rt
            .block_on(async { db.drop().await })
            .expect("drop the bench database");
        db
    }
}

/// One strategy under test, with the collections it writes (to empty them between samples).
struct Contender {
    store: Arc<DynInboxStore<String>>,
    collections: Vec<String>,
}

impl Contender {
    fn name(&self) -> &'static str {
        self.store.strategy().name()
    }

    /// Drops the store's collections and creates its indexes again.
    async fn reset(&self) {
        let db = self.store.database();
        for name in &self.collections {
            db.collection::<Document>(name)
                .drop()
                .await
                .expect("drop a bench collection");
        }
        self.store.create_indexes().await.expect("create indexes");
    }
}

/// The three strategies in `db`, their collection names starting with `prefix`.
fn contenders(db: &Database, prefix: &str, bucket_size: u32) -> Vec<Contender> {
    let collections = |strategy: Strategy| -> Vec<String> {
        strategy
            .collections()
            .iter()
            .map(|name| format!("{prefix}{name}"))
            .collect()
    };
    vec![
        Contender {
            store: Arc::new(
                FanOutOnRead::builder(db)
                    .collection_prefix(prefix)
                    .build()
                    .expect("store"),
            ),
            collections: collections(Strategy::FanOutOnRead),
        },
        Contender {
            store: Arc::new(
                FanOutOnWrite::builder(db)
                    .collection_prefix(prefix)
                    .build()
                    .expect("store"),
            ),
            collections: collections(Strategy::FanOutOnWrite),
        },
        Contender {
            store: Arc::new(
                BucketedFanOut::builder(db)
                    .bucket_size(bucket_size)
                    .collection_prefix(prefix)
                    .build()
                    .expect("store"),
            ),
            collections: collections(Strategy::BucketedFanOut),
        },
    ]
}

/// One seed baseline in its own database (the seed's collection names are fixed).
struct Seed {
    seed: SeedBaseline,
    db: Database,
}

impl Seed {
    fn name(&self) -> &'static str {
        self.seed.name()
    }

    /// Drops the design's collections and creates its indexes again.
    async fn reset(&self) {
        for name in self.seed.collections() {
            self.db
                .collection::<Document>(name)
                .drop()
                .await
                .expect("drop a bench collection");
        }
        self.seed
            .create_indexes(&self.db)
            .await
            .expect("create indexes");
    }
}

/// The three seed baselines, each in the (dropped) database
/// `mongo_social_bench_<group>_seed_<design><suffix>`.
fn seeds(env: &Env, group: &str, suffix: &str) -> Vec<Seed> {
    SeedBaseline::ALL
        .into_iter()
        .map(|seed| {
            let design = seed.name().replace([' ', '-'], "_");
            Seed {
                seed,
                db: env.database(&format!("{group}_{design}{suffix}")),
            }
        })
        .collect()
}

/// Whatever a benchmark measures: a library strategy or a seed baseline.
enum Subject {
    Library(Contender),
    Seed(Seed),
}

/// The messages of one timed run, built before the clock starts.
enum Batch {
    Library(Vec<NewMessage<String>>),
    Seed(Vec<String>),
}

impl Subject {
    fn name(&self) -> &'static str {
        match self {
            Subject::Library(k) => k.name(),
            Subject::Seed(s) => s.name(),
        }
    }

    async fn reset(&self) {
        match self {
            Subject::Library(k) => k.reset().await,
            Subject::Seed(s) => s.reset().await,
        }
    }

    /// Message `i` from `sender` to `to`.
    async fn send(&self, to: &[String], i: u64) {
        match self {
            Subject::Library(k) => {
                let message = NewMessage::new("sender", to.to_vec(), text("sender", i));
                k.store.send(message).await.expect("send");
            }
            Subject::Seed(s) => {
                let message = text("sender", i);
                s.seed
                    .send(&s.db, "sender", to, &message)
                    .await
                    .expect("send");
            }
        }
    }

    /// Messages `0..iters` from `sender` to `to`, ready for [`Subject::send_batch`].
    fn batch(&self, to: &[String], iters: u64) -> Batch {
        match self {
            Subject::Library(_) => Batch::Library(
                (0..iters)
                    .map(|i| NewMessage::new("sender", to.to_vec(), text("sender", i)))
                    .collect(),
            ),
            Subject::Seed(_) => Batch::Seed((0..iters).map(|i| text("sender", i)).collect()),
        }
    }

    /// Sends the batch, one message after another.
    async fn send_batch(&self, to: &[String], batch: Batch) {
        match (self, batch) {
            (Subject::Library(k), Batch::Library(messages)) => {
                for message in messages {
                    k.store.send(message).await.expect("send");
                }
            }
            (Subject::Seed(s), Batch::Seed(messages)) => {
                for message in messages {
                    s.seed
                        .send(&s.db, "sender", to, &message)
                        .await
                        .expect("send");
                }
            }
            _ => unreachable!("a batch is built by the subject that sends it"),
        }
    }
}

/// `user0`, `user1`, ...
fn users(n: u64) -> Vec<String> {
    (0..n).map(|i| format!("user{i}")).collect()
}

/// A 64-character message text.
fn text(from: &str, i: u64) -> String {
    format!("{:.<64}", format!("message {i} from {from} "))
}

/// Operations and commands seen by the timed runs of one benchmark.
#[derive(Default)]
struct Tally {
    operations: Cell<u64>,
    commands: Cell<u64>,
}

impl Tally {
    fn add(&self, operations: u64, commands: usize) {
        self.operations.set(self.operations.get() + operations);
        self.commands.set(self.commands.get() + commands as u64);
    }

    fn report(&self, what: &str) {
        let operations = self.operations.get();
        if operations > 0 {
            eprintln!(
                "{what}: {:.2} commands per send on average over the {operations} sends timed",
                self.commands.get() as f64 / operations as f64
            );
        }
    }
}

fn bench_send(c: &mut Criterion, env: &Env) {
    let db = env.database("send");
    let subjects: Vec<Subject> = contenders(&db, "", env.config.bucket_size)
        .into_iter()
        .map(Subject::Library)
        .chain(seeds(env, "send", "").into_iter().map(Subject::Seed))
        .collect();
    let runs = |k: &Subject, n: u64| matches!(k, Subject::Library(_)) || env.config.seeds_send(n);
    for &n in &env.config.send_n {
        let to = users(n);
        for k in subjects.iter().filter(|k| runs(k, n)) {
            let names = env.rt.block_on(async {
                k.reset().await;
                // The first send detects the server; the second is a steady one.
                for i in 0..2 {
                    env.commands.reset();
                    k.send(&to, i).await;
                }
                env.commands.names()
            });
            eprintln!("send N={n}: {} {}", k.name(), bench_env::describe(&names));
        }
    }

    let mut group = c.benchmark_group("send");
    group.sampling_mode(SamplingMode::Flat);
    for &n in &env.config.send_n {
        group.throughput(Throughput::Elements(n));
        let to = users(n);
        for k in subjects.iter().filter(|k| runs(k, n)) {
            let tally = Tally::default();
            group.bench_with_input(BenchmarkId::new(k.name(), n), &n, |b, _| {
                b.to_async(&env.rt).iter_custom(|iters| {
                    let (to, tally) = (&to, &tally);
                    async move {
                        k.reset().await;
                        // Untimed: buckets exist and the server is detected, so every timed
                        // send is a steady-state one.
                        k.send(to, iters).await;
                        let batch = k.batch(to, iters);
                        env.commands.reset();
                        let start = Instant::now();
                        k.send_batch(to, batch).await;
                        let elapsed = start.elapsed();
                        tally.add(iters, env.commands.total());
                        elapsed
                    }
                });
            });
            tally.report(&format!("send N={n}: {}", k.name()));
        }
    }
    group.finish();
}

/// Message `i` of an inbox fill: `(from, text)`, from 8 senders in turn.
fn fill_message(i: u64) -> (String, String) {
    let from = format!("sender{}", i % SENDERS as u64);
    let text = text(&from, i);
    (from, text)
}

/// Filling and reading the inbox of [`OWNER`] in the `inbox_page` group.
impl Subject {
    fn is_bucketed(&self) -> bool {
        match self {
            Subject::Library(k) => k.store.strategy() == Strategy::BucketedFanOut,
            Subject::Seed(s) => s.seed == SeedBaseline::Bucketed,
        }
    }

    /// How many sends may fill an inbox at once. Without atomic updates our bucketed sends to
    /// one owner take turns under a lock, so concurrent fillers would only wait for each other;
    /// the seed's bucketed upserts have no unique index behind them, so concurrent sends to one
    /// owner could create two `users` documents for it, or lose a `$push`.
    fn fill_tasks(&self, env: &Env) -> usize {
        let one_at_a_time = match self {
            Subject::Library(_) => self.is_bucketed() && !env.atomic_updates,
            Subject::Seed(_) => self.is_bucketed(),
        };
        if one_at_a_time {
            1
        } else {
            env.config.fill_tasks
        }
    }

    /// Empties the subject and fills [`OWNER`]'s inbox with `m` messages: through `send`, or
    /// for a bucketed inbox past [`Config::buckets_sent`], loaded in bulk but for its last
    /// message. Returns whether it was loaded; checks that the inbox holds `m`.
    async fn fill_inbox(&self, env: &Env, m: u64) -> bool {
        self.reset().await;
        let loaded = self.is_bucketed() && !env.config.buckets_sent(m, env.atomic_updates);
        let from = if loaded { m - 1 } else { 0 };
        if loaded {
            let messages: Vec<_> = (0..from).map(fill_message).collect();
            match self {
                Subject::Library(k) => bucket_load::load_buckets(
                    k.store.database(),
                    &k.collections[0],
                    &k.collections[1],
                    env.config.bucket_size,
                    OWNER,
                    &messages,
                )
                .await
                .expect("load the buckets"),
                Subject::Seed(s) => seed_baselines::bucketed_load(&s.db, OWNER, &messages)
                    .await
                    .expect("load the seed's buckets"),
            }
        }
        futures::stream::iter(from..m)
            .map(|i| async move {
                let (from, text) = fill_message(i);
                match self {
                    Subject::Library(k) => k
                        .store
                        .send(NewMessage::new(from, [OWNER], text))
                        .await
                        .map(drop)
                        .map_err(|error| error.to_string()),
                    Subject::Seed(s) => s
                        .seed
                        .send(&s.db, &from, &[OWNER.to_owned()], &text)
                        .await
                        .map_err(|error| error.to_string()),
                }
            })
            .buffer_unordered(self.fill_tasks(env))
            .try_for_each(|_| async { Ok(()) })
            .await
            .expect("fill the inbox");
        let held = match self {
            Subject::Library(k) => k.store.count(OWNER).await.expect("count"),
            Subject::Seed(s) => {
                let read = s.seed.read(&s.db, OWNER, m as usize).await;
                read.expect("read the inbox").len() as u64
            }
        };
        assert_eq!(held, m, "{}", self.name());
        loaded
    }

    /// The newest [`PAGE`] messages of [`OWNER`]; returns how many came back.
    async fn read_page(&self) -> usize {
        match self {
            Subject::Library(k) => {
                let page = k.store.inbox_page(OWNER, PageRequest::first(PAGE)).await;
                page.expect("page").items.len()
            }
            Subject::Seed(s) => s.seed.read(&s.db, OWNER, PAGE).await.expect("page").len(),
        }
    }

    /// How many documents the subject's messages collection holds, and its name.
    async fn documents(&self) -> (u64, String) {
        let (db, name) = match self {
            Subject::Library(k) => (k.store.database().clone(), k.collections[0].clone()),
            Subject::Seed(s) => (s.db.clone(), "inbox".to_owned()),
        };
        let count = db
            .collection::<Document>(&name)
            .estimated_document_count()
            .await
            .expect("count documents");
        (count, format!("{}.{name}", db.name()))
    }
}

fn bench_inbox_page(c: &mut Criterion, env: &Env) {
    let db = env.database("inbox_page");
    let mut filled = Vec::new();
    for &m in &env.config.page_m {
        let prefix = format!("m{m}_");
        let subjects = contenders(&db, &prefix, env.config.bucket_size)
            .into_iter()
            .map(Subject::Library)
            .chain(
                seeds(env, "inbox_page", &format!("_m{m}"))
                    .into_iter()
                    .map(Subject::Seed),
            );
        for k in subjects {
            let started = Instant::now();
            let (loaded, (documents, place), names) = env.rt.block_on(async {
                let loaded = k.fill_inbox(env, m).await;
                assert_eq!(k.read_page().await, PAGE.min(m as usize));
                let (read, names) = env.commands.measure(k.read_page()).await;
                assert_eq!(read, PAGE.min(m as usize));
                (loaded, k.documents().await, names)
            });
            eprintln!(
                "inbox_page M={m}: {} {} ({} in {:.1} s; {documents} documents in {place})",
                k.name(),
                bench_env::describe(&names),
                if loaded {
                    "loaded in bulk but the last message, sent,"
                } else {
                    "filled through send"
                },
                started.elapsed().as_secs_f64(),
            );
            filled.push((m, k));
        }
    }

    let mut group = c.benchmark_group("inbox_page");
    // Flat: on a server that scans (FerretDB) a read of a 100,000-message inbox takes seconds,
    // and criterion's linear sampling (55 iterations for 10 samples) would run for minutes.
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(PAGE as u64));
    for (m, k) in &filled {
        group.bench_with_input(BenchmarkId::new(k.name(), m), m, |b, _| {
            b.to_async(&env.rt).iter(|| async {
                assert_eq!(k.read_page().await, PAGE.min(*m as usize));
            });
        });
    }
    group.finish();
}

/// The recipients of sender `s`: three neighbours in a ring of [`SENDERS`] users.
fn ring_recipients(s: usize) -> Vec<String> {
    (0..RECIPIENTS_PER_MESSAGE)
        .map(|r| format!("user{}", (s + r) % SENDERS))
        .collect()
}

/// [`SENDERS`] tasks each sending `k` messages to their [`ring_recipients`].
async fn concurrent_round(store: &Arc<DynInboxStore<String>>, k: u64) {
    let tasks: Vec<_> = (0..SENDERS)
        .map(|s| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let from = format!("sender{s}");
                let to = ring_recipients(s);
                for i in 0..k {
                    let message = NewMessage::new(from.as_str(), to.clone(), text(&from, i));
                    store.send(message).await.expect("send");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("sender task");
    }
}

fn bench_concurrent_send(c: &mut Criterion, env: &Env) {
    let db = env.database("concurrent_send");
    let contenders = contenders(&db, "", env.config.bucket_size);
    for &k_per_sender in &env.config.concurrent_k {
        let total = SENDERS as u64 * k_per_sender;
        for k in &contenders {
            let (names, snapshot) = env.rt.block_on(async {
                k.reset().await;
                // Detect the server first.
                concurrent_round(&k.store, 1).await;
                env.commands.reset();
                concurrent_round(&k.store, k_per_sender).await;
                (env.commands.names(), env.commands.snapshot())
            });
            eprintln!(
                "concurrent_send {SENDERS}x{k_per_sender}: {} {} commands for {total} messages \
                 ({:.2} per message) {snapshot:?}",
                k.name(),
                names.len(),
                names.len() as f64 / total as f64,
            );
        }
    }

    let mut group = c.benchmark_group("concurrent_send");
    group.sampling_mode(SamplingMode::Flat);
    for &k_per_sender in &env.config.concurrent_k {
        let total = SENDERS as u64 * k_per_sender;
        group.throughput(Throughput::Elements(total));
        for k in &contenders {
            let tally = Tally::default();
            group.bench_with_input(BenchmarkId::new(k.name(), total), &total, |b, _| {
                b.to_async(&env.rt).iter_custom(|iters| {
                    let tally = &tally;
                    async move {
                        k.reset().await;
                        concurrent_round(&k.store, 1).await;
                        env.commands.reset();
                        let start = Instant::now();
                        for _ in 0..iters {
                            concurrent_round(&k.store, k_per_sender).await;
                        }
                        let elapsed = start.elapsed();
                        tally.add(iters * total, env.commands.total());
                        elapsed
                    }
                });
            });
            tally.report(&format!(
                "concurrent_send {SENDERS}x{k_per_sender}: {}",
                k.name()
            ));
        }
    }
    group.finish();
}

fn main() {
    let started = Instant::now();
    let env = Env::new();
    let mut c = bench_env::criterion(Duration::from_secs(3));
    if env.config.runs("send") {
        bench_send(&mut c, &env);
    }
    if env.config.runs("inbox_page") {
        bench_inbox_page(&mut c, &env);
    }
    if env.config.runs("concurrent_send") {
        bench_concurrent_send(&mut c, &env);
    }
    c.final_summary();
    eprintln!(
        "inbox benches done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
