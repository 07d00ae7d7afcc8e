//! The three comment strategies head to head: posting into a discussion, and reading a page of it
//! near the start and near the end, with the MongoDB manual's own algorithms
//! (`benches/support/seed_comments.rs`, implemented literally with plain driver calls) as
//! sibling baselines.
//!
//! ```text
//! cargo bench --bench comments                                # local FerretDB, small sizes
//! MONGODB_URI=mongodb://127.0.0.1:27017/ MONGO_SOCIAL_BENCH_SCALE=full cargo bench --bench comments
//! ```
//!
//! Every (group, strategy, M) gets its own database, `mongo_social_bench_comments_<group>_<strategy>_m<M>`,
//! dropped before it is filled (on FerretDB 1.x every query but `{_id: x}` scans its whole
//! collection, so sharing one would measure the neighbours). Discussions are filled with M
//! top-level comments of 64 characters from 8 authors, the six strategies' discussions at the same
//! time (untimed): our strategies through the store's `post`,
//! `MONGO_SOCIAL_BENCH_FILL_TASKS` at a time (one at a time for embedded and hybrid pages on a
//! server without atomic updates, where a discussion lock serialises them anyway); the seed
//! baselines through their own post (per-comment concurrently; embedded concurrently only where
//! updates are atomic; hybrid one at a time, as the manual's page counter is racy).
//!
//! Groups:
//!
//! - `post`: one comment posted into a discussion that holds M comments at the start
//!   (`<strategy> post/M`), and for the threaded strategies one reply to a top-level comment
//!   (`<strategy> reply/M`, each reply to another comment of the fill). Seed baselines:
//!   `seed per-comment` (an `insert`; a reply finds its parent by slug first), `seed embedded`
//!   (`$push`), `seed hybrid` (read the discussion, upserting `findAndModify` on the last page,
//!   and the page counter `update` when a page passes 100). Timed posts accumulate: after each
//!   benchmark a line gives the average commands per post it timed and the discussion's size
//!   at the end. Throughput: 1 element.
//! - `page`: 50 comments of a discussion of M comments, `<strategy> <view> <where>/M` with view
//!   `chronological` or `threaded` (threaded strategies only) and where `first` (offset 0) or `end`
//!   (the last 50: offset M - 50, rounded down to a multiple of 50). Our strategies read keyset pages: the `end` cursor is found
//!   once, untimed, by paging through. The seeds read `skip`-based pages (`page_num = M / 50 -
//!   1`): per-comment `sort` + `skip` + `limit`; embedded `$slice: [skip, 50]` (threaded: the
//!   whole document, paged client-side); hybrid walks the pages from the first, one query each,
//!   subtracting counts from `skip`. Comparing `first` with `end` and one M with the next shows
//!   whether a strategy's cost stays flat. An embedded discussion must fit one 16 MiB document:
//!   an M that would not is skipped, with the reason printed. Throughput: 50 elements.
//!
//! Before each group, one line per (strategy, operation, M) gives the commands one operation sent,
//! as a [`CommandCounter`] on the bench client saw them. On a server without `$slice` projections
//! (FerretDB 1.x) a line says that the seed's embedded and hybrid pages read whole documents and
//! slice them client-side (our embedded strategy does the same there).
//!
//! Sizes (defaults suit the local FerretDB; `full` is meant for a real MongoDB via
//! `MONGODB_URI`):
//!
//! | variable | default | `MONGO_SOCIAL_BENCH_SCALE=full` |
//! |---|---|---|
//! | `MONGO_SOCIAL_BENCH_COMMENT_POST` (discussion size M in `post`) | `100` | `100,10000` |
//! | `MONGO_SOCIAL_BENCH_COMMENT_PAGE` (discussion size M in `page`) | `100,400` | `1000,10000,100000` |
//! | `MONGO_SOCIAL_BENCH_FILL_TASKS` (concurrent posts while filling) | `4` | `16` |
//! | `MONGO_SOCIAL_BENCH_GROUPS` (which groups run: `post`, `page`) | all | all |
//!
//! Criterion defaults here are 10 samples (flat sampling), 1 s warm-up, 2 s measurement; the usual flags
//! (`--sample-size`, `--measurement-time`, `--warm-up-time`, a name filter) override them. At
//! the default scale on the local FerretDB the whole run took about 14 minutes on a busy 2-core
//! VM, most of it filling the 1,000-comment embedded and hybrid discussions (FerretDB rewrites the
//! growing document on every post); `MONGO_SOCIAL_BENCH_COMMENT_PAGE=100` skips that.

use std::cell::Cell;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use mongo_social_lab::CommandCounter;
use mongodb::{Client, Database};
use tokio::runtime::Runtime;

#[path = "support/bench_env.rs"]
mod bench_env;

#[path = "support/seed_comments.rs"]
mod seed_comments;

#[path = "support/comment_subjects.rs"]
mod comment_subjects;

use comment_subjects::{Server, Subject, PAGE};

/// Sizes and switches, from the environment.
#[derive(Debug)]
struct Config {
    full: bool,
    post_m: Vec<u64>,
    page_m: Vec<u64>,
    fill_tasks: usize,
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
        let mut page_m = bench_env::list(
            "MONGO_SOCIAL_BENCH_COMMENT_PAGE",
            pick(&[1000, 10_000, 100_000], &[100, 400]),
        );
        // Smallest first: the embedded size check uses the comments of the discussions filled.
        page_m.sort_unstable();
        Self {
            full,
            post_m: bench_env::list(
                "MONGO_SOCIAL_BENCH_COMMENT_POST",
                pick(&[100, 10_000], &[100]),
            ),
            page_m,
            fill_tasks: bench_env::number(
                "MONGO_SOCIAL_BENCH_FILL_TASKS",
                if full { 16 } else { 4 },
            ),
            groups: bench_env::groups(),
        }
    }

    fn runs(&self, group: &str) -> bool {
        bench_env::runs(&self.groups, group)
    }
}

/// What every group shares: the runtime, one client with a command counter, the sizes.
struct Env {
    rt: Runtime,
    client: Client,
    commands: CommandCounter,
    config: Config,
    /// What the server offers that changes how the strategies run.
    server: Server,
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
            server: Server::of(&info),
        }
    }

    /// `mongo_social_bench_comments_<name>`, dropped.
    fn database(&self, name: &str) -> Database {
        let db = self
            .client
            .database(&format!("mongo_social_bench_comments_{name}"));
        self.rt
            .block_on(async { db.drop().await })
            .expect("drop the bench database");
        db
    }
}

/// Our three strategies and the manual's three, each in the (dropped) database
/// `mongo_social_bench_comments_<group>_<strategy>_m<m>`.
fn subjects(env: &Env, group: &str, m: u64) -> Vec<Subject> {
    comment_subjects::subjects(|name| {
        let strategy = name.replace([' ', '-'], "_");
        env.database(&format!("{group}_{strategy}_m{m}"))
    })
}

/// The note printed when the server has no `$slice` projection.
fn no_slice_note(env: &Env, group: &str) {
    if !env.server.seed.slice_projection {
        eprintln!(
            "{group}: this server has no $slice projection: the seed's embedded and hybrid pages \
             (and our embedded strategy) read whole documents and slice them client-side"
        );
    }
}

/// A post or a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Post,
    Reply,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Post => "post",
            Op::Reply => "reply",
        }
    }
}

/// A filled discussion in the `post` group, and how many comments it has taken since.
struct Posting {
    m: u64,
    subject: Subject,
    /// Top-level comments of the fill, for replies to pick from.
    links: Vec<String>,
    /// The next comment number.
    next: Cell<u64>,
}

impl Posting {
    /// What can be timed in this strategy: a post, and a reply where it has threads.
    fn ops(&self) -> &'static [Op] {
        if self.subject.threaded() {
            &[Op::Post, Op::Reply]
        } else {
            &[Op::Post]
        }
    }

    async fn run(&self, env: &Env, op: Op) {
        let i = self.next.get();
        self.next.set(i + 1);
        match op {
            Op::Post => {
                self.subject.post(env.server, i).await.expect("post");
            }
            Op::Reply => {
                // Spread replies over the fill's comments, so no thread grows much.
                let parent = &self.links[(i as usize * 7) % self.links.len()];
                self.subject.reply(parent, i).await.expect("reply");
            }
        }
    }
}

/// Fills every subject's discussion with `m` comments, all subjects at once (each its own
/// database and discussion, so they do not interfere beyond sharing the server); returns each
/// one's top-level links and how long its fill took, in seconds.
fn fill_all(env: &Env, subjects: &[Subject], m: u64) -> Vec<(Vec<String>, f64)> {
    env.rt
        .block_on(futures::future::join_all(subjects.iter().map(
            |subject| async move {
                let started = Instant::now();
                subject.setup().await.expect("set the discussion up");
                let links = subject
                    .fill(env.server, 0, m, env.config.fill_tasks)
                    .await
                    .expect("fill the discussion");
                (links, started.elapsed().as_secs_f64())
            },
        )))
}

fn bench_post(c: &mut Criterion, env: &Env) {
    let mut postings = Vec::new();
    for &m in &env.config.post_m {
        let subjects = subjects(env, "post", m);
        let fills = fill_all(env, &subjects, m);
        for (subject, (links, filled)) in subjects.into_iter().zip(fills) {
            eprintln!("post M={m}: {} filled in {filled:.1} s", subject.name);
            postings.push(Posting {
                m,
                subject,
                links,
                next: Cell::new(m),
            });
        }
    }
    for p in &postings {
        for &op in p.ops() {
            let names = env.rt.block_on(async {
                // The first operation detects the server; the second is a steady one.
                p.run(env, op).await;
                env.commands.reset();
                p.run(env, op).await;
                env.commands.names()
            });
            eprintln!(
                "post M={}: {} {}: {}",
                p.m,
                p.subject.name,
                op.name(),
                bench_env::describe(&names)
            );
        }
    }

    let mut group = c.benchmark_group("post");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(1));
    for p in &postings {
        for &op in p.ops() {
            let (operations, commands) = (Cell::new(0_u64), Cell::new(0_usize));
            let id = BenchmarkId::new(format!("{} {}", p.subject.name, op.name()), p.m);
            group.bench_with_input(id, &p.m, |b, _| {
                b.to_async(&env.rt).iter_custom(|iters| {
                    let (operations, commands) = (&operations, &commands);
                    async move {
                        env.commands.reset();
                        let start = Instant::now();
                        for _ in 0..iters {
                            p.run(env, op).await;
                        }
                        let elapsed = start.elapsed();
                        operations.set(operations.get() + iters);
                        commands.set(commands.get() + env.commands.total());
                        elapsed
                    }
                });
            });
            if operations.get() > 0 {
                eprintln!(
                    "post M={}: {} {}: {:.2} commands per {} on average over the {} timed; the \
                     discussion holds {} comments now",
                    p.m,
                    p.subject.name,
                    op.name(),
                    commands.get() as f64 / operations.get() as f64,
                    op.name(),
                    operations.get(),
                    p.next.get(),
                );
            }
        }
    }
    group.finish();
}

fn bench_page(c: &mut Criterion, env: &Env) {
    no_slice_note(env, "page");
    let mut cases: Vec<(u64, Subject, Vec<comment_subjects::PageCase>)> = Vec::new();
    for &m in &env.config.page_m {
        let mut fitting = Vec::new();
        for subject in subjects(env, "page", m) {
            if let Err(reason) = subject.fits(m) {
                eprintln!("page M={m}: {} skipped: {reason}", subject.name);
                continue;
            }
            fitting.push(subject);
        }
        let fills = fill_all(env, &fitting, m);
        for (subject, (_, filled)) in fitting.into_iter().zip(fills) {
            let subject_cases = env
                .rt
                .block_on(subject.page_cases(m))
                .expect("page through to the end");
            for case in &subject_cases {
                let (len, names) = env.rt.block_on(async {
                    // The first read detects the server; the second is a steady one.
                    subject.read(env.server, case).await.expect("page");
                    env.commands.measure(subject.read(env.server, case)).await
                });
                let len = len.expect("page");
                assert_eq!(
                    len,
                    PAGE.min(m as usize),
                    "{} {} {}",
                    subject.name,
                    case.view.name(),
                    case.place
                );
                eprintln!(
                    "page M={m}: {} {} {}: {} (filled in {filled:.1} s)",
                    subject.name,
                    case.view.name(),
                    case.place,
                    bench_env::describe(&names),
                );
            }
            cases.push((m, subject, subject_cases));
        }
    }

    let mut group = c.benchmark_group("page");
    // Flat: a seed page deep in a big discussion takes long enough that criterion's linear
    // sampling (55 iterations for 10 samples) would run for minutes.
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(PAGE as u64));
    for (m, subject, subject_cases) in &cases {
        for case in subject_cases {
            let id = BenchmarkId::new(
                format!("{} {} {}", subject.name, case.view.name(), case.place),
                m,
            );
            group.bench_with_input(id, m, |b, _| {
                b.to_async(&env.rt)
                    .iter(|| async { subject.read(env.server, case).await.expect("page") });
            });
        }
    }
    group.finish();
}

fn main() {
    let started = Instant::now();
    let env = Env::new();
    let mut c = bench_env::criterion(Duration::from_secs(2));
    if env.config.runs("post") {
        bench_post(&mut c, &env);
    }
    if env.config.runs("page") {
        bench_page(&mut c, &env);
    }
    c.final_summary();
    eprintln!(
        "comments benches done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
