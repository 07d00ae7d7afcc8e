//! Comment votes and ranked pages in the three comment strategies, on a discussion of N
//! top-level comments holding V votes (issue 18: 1,000 comments and 10,000 votes).
//!
//! ```text
//! cargo bench --bench comment_votes                      # local FerretDB, 100 comments, 1,000 votes
//! MONGO_SOCIAL_BENCH_SCALE=full cargo bench --bench comment_votes   # 1,000 comments, 10,000 votes
//! MONGO_SOCIAL_SERVER=mongo-java-server MONGO_SOCIAL_BENCH_SCALE=full cargo bench --bench comment_votes
//! ```
//!
//! Every strategy gets its own database, `mongo_social_bench_votes_<strategy>`, dropped before it
//! is filled (untimed) through the store's own calls, `MONGO_SOCIAL_BENCH_FILL_TASKS` at a time:
//! N top-level comments, then V votes by V distinct users, 70 % up, spread over the comments with
//! a long tail (the comment at rank r gets a share proportional to 1 / (r + 1)), the same
//! sequence in every strategy.
//!
//! Groups:
//!
//! - `vote`: `<strategy> vote/N`, a first vote by a new user on a comment of the discussion
//!   (drawn from the same long tail), and `<strategy> change/N`, a user of the fill turning
//!   their vote around (up to down, or down to up). Throughput: 1 element.
//! - `ranked`: `<strategy> <sort>/N`, the first page of 50 top-level comments by each sort
//!   (`best`, `hot`, `top`, `controversial`), and `<strategy> <sort> next/N`, the page after it.
//!   Throughput: 50 elements.
//!
//! Before each group, one line per (strategy, operation) gives the commands one operation sent
//! (from a `CommandCounter` on the bench client).
//!
//! | variable | default | `MONGO_SOCIAL_BENCH_SCALE=full` |
//! |---|---|---|
//! | `MONGO_SOCIAL_BENCH_VOTE_COMMENTS` (N) | `100` | `1000` |
//! | `MONGO_SOCIAL_BENCH_VOTES` (V) | `1000` | `10000` |
//! | `MONGO_SOCIAL_BENCH_FILL_TASKS` (concurrent calls while filling) | `4` | `16` |
//! | `MONGO_SOCIAL_BENCH_GROUPS` (which groups run: `vote`, `ranked`) | all | all |
//!
//! Criterion runs 10 samples (flat sampling), 1 s warm-up and 2 s measurement per benchmark;
//! the usual flags override them. On FerretDB 1.x every vote of a discussion takes the
//! discussion's lock, so the fill runs one vote at a time there whatever the tasks.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use futures::StreamExt;
use mongo_social::comments::{
    Author, DynCommentStore, Embedded, HybridPages, NewComment, PerComment, Sort, Vote,
};
use mongo_social::PageRequest;
use mongodb::Client;
use tokio::runtime::Runtime;

#[path = "support/bench_env.rs"]
#[allow(dead_code)] // shared by every bench; this one uses part of it
mod bench_env;

const DISCUSSION: &str = "discussion-1";
/// Comments per ranked page.
const PAGE: usize = 50;

/// Sizes and switches, from the environment.
#[derive(Debug)]
struct Config {
    full: bool,
    comments: usize,
    votes: usize,
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
        let pick = |full_value: usize, default: usize| if full { full_value } else { default };
        Self {
            full,
            comments: bench_env::number("MONGO_SOCIAL_BENCH_VOTE_COMMENTS", pick(1000, 100)),
            votes: bench_env::number("MONGO_SOCIAL_BENCH_VOTES", pick(10_000, 1000)),
            fill_tasks: bench_env::number("MONGO_SOCIAL_BENCH_FILL_TASKS", pick(16, 4)),
            groups: bench_env::groups(),
        }
    }
}

/// A deterministic pseudo-random sequence (64-bit LCG), the same in every strategy.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// A comment index in `0..n`, rank r drawn with weight 1 / (r + 1).
    fn long_tail(&mut self, n: usize) -> usize {
        let harmonic: f64 = (1..=n).map(|r| 1.0 / r as f64).sum();
        let mut target = (self.next() as f64 / (1u64 << 31) as f64) * harmonic;
        for r in 0..n {
            target -= 1.0 / (r + 1) as f64;
            if target <= 0.0 {
                return r;
            }
        }
        n - 1
    }

    /// Up 70 % of the time.
    fn vote(&mut self) -> Vote {
        if self.next() % 10 < 7 {
            Vote::Up
        } else {
            Vote::Down
        }
    }
}

/// One strategy's filled discussion.
struct Subject {
    name: &'static str,
    store: Arc<DynCommentStore>,
    links: Vec<String>,
    /// The fill's votes, `(comment, vote)` per user `fill<i>`.
    cast: Vec<(usize, Vote)>,
    /// Users of the timed first votes so far, and fill users whose vote was turned around.
    next_user: Cell<usize>,
    next_turn: Cell<usize>,
}

fn stores(client: &Client) -> Vec<(&'static str, Arc<DynCommentStore>)> {
    let db = |name: &str| {
        client.database(&format!(
            "mongo_social_bench_votes_{}",
            name.replace('-', "_")
        ))
    };
    vec![
        (
            "per-comment",
            Arc::new(PerComment::new(&db("per-comment"))) as Arc<DynCommentStore>,
        ),
        ("embedded", Arc::new(Embedded::new(&db("embedded")))),
        (
            "hybrid-pages",
            Arc::new(HybridPages::new(&db("hybrid-pages"))),
        ),
    ]
}

async fn fill(
    name: &'static str,
    store: Arc<DynCommentStore>,
    config: &Config,
) -> mongo_social::Result<Subject> {
    let author = Author::new("author", "Author");
    store.create_indexes().await?;
    store.create_discussion(DISCUSSION).await?;
    let mut links = Vec::with_capacity(config.comments);
    for i in 0..config.comments {
        let text = format!("comment {i}: {}", "x".repeat(48));
        links.push(
            store
                .post(DISCUSSION, NewComment::new(author.clone(), text))
                .await?
                .link,
        );
    }
    let mut draws = Draws(18);
    let cast: Vec<(usize, Vote)> = (0..config.votes)
        .map(|_| (draws.long_tail(config.comments), draws.vote()))
        .collect();
    let (store_ref, links_ref) = (&store, &links);
    let results: Vec<mongo_social::Result<()>> = futures::stream::iter(cast.iter().enumerate())
        .map(|(user, (comment, vote))| async move {
            store_ref
                .vote(
                    DISCUSSION,
                    &links_ref[*comment],
                    &format!("fill{user}"),
                    *vote,
                )
                .await
                .map(drop)
        })
        .buffer_unordered(config.fill_tasks)
        .collect()
        .await;
    results.into_iter().collect::<mongo_social::Result<()>>()?;
    Ok(Subject {
        name,
        store,
        links,
        cast,
        next_user: Cell::new(0),
        next_turn: Cell::new(0),
    })
}

/// A timed operation of the `vote` group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// A new user's first vote.
    Vote,
    /// A fill user's vote turned around.
    Change,
}

impl Subject {
    async fn run(&self, op: Op) {
        match op {
            Op::Vote => {
                let user = self.next_user.get();
                self.next_user.set(user + 1);
                let mut draws = Draws(user as u64 + 7);
                let comment = draws.long_tail(self.links.len());
                self.store
                    .vote(
                        DISCUSSION,
                        &self.links[comment],
                        &format!("new{user}"),
                        draws.vote(),
                    )
                    .await
                    .expect("vote");
            }
            Op::Change => {
                let turn = self.next_turn.get();
                self.next_turn.set(turn + 1);
                // Each pass over the fill's users turns every vote around once more.
                let user = turn % self.cast.len();
                let (comment, vote) = self.cast[user];
                let flipped = (turn / self.cast.len()).is_multiple_of(2);
                let vote = match (vote, flipped) {
                    (Vote::Up, true) | (Vote::Down, false) => Vote::Down,
                    _ => Vote::Up,
                };
                self.store
                    .vote(
                        DISCUSSION,
                        &self.links[comment],
                        &format!("fill{user}"),
                        vote,
                    )
                    .await
                    .expect("change");
            }
        }
    }
}

struct Env {
    rt: Runtime,
    commands: mongo_social_lab::CommandCounter,
    config: Config,
    subjects: Vec<Subject>,
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
        let mut subjects = Vec::new();
        for (name, store) in stores(&client) {
            let started = Instant::now();
            let subject = rt.block_on(async {
                let db_name = format!("mongo_social_bench_votes_{}", name.replace('-', "_"));
                client
                    .database(&db_name)
                    .drop()
                    .await
                    .expect("drop the bench database");
                fill(name, store, &config)
                    .await
                    .expect("fill the discussion")
            });
            eprintln!(
                "{name}: {} comments and {} votes filled in {:.1} s",
                config.comments,
                config.votes,
                started.elapsed().as_secs_f64()
            );
            subjects.push(subject);
        }
        Self {
            rt,
            commands,
            config,
            subjects,
        }
    }
}

fn bench_vote(c: &mut Criterion, env: &Env) {
    for subject in &env.subjects {
        for op in [Op::Vote, Op::Change] {
            let names = env.rt.block_on(async {
                env.commands.reset();
                subject.run(op).await;
                env.commands.names()
            });
            eprintln!(
                "vote N={}: {} {op:?}: {}",
                env.config.comments,
                subject.name,
                bench_env::describe(&names)
            );
        }
    }
    let mut group = c.benchmark_group("vote");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(1));
    for subject in &env.subjects {
        for op in [Op::Vote, Op::Change] {
            let label = match op {
                Op::Vote => "vote",
                Op::Change => "change",
            };
            let id = BenchmarkId::new(format!("{} {label}", subject.name), env.config.comments);
            group.bench_with_input(id, &op, |b, &op| {
                b.to_async(&env.rt).iter(|| subject.run(op));
            });
        }
    }
    group.finish();
}

fn bench_ranked(c: &mut Criterion, env: &Env) {
    // The cursor after each sort's first page, found once, untimed.
    let mut cases = Vec::new();
    for subject in &env.subjects {
        for sort in Sort::ALL {
            let (first, names) = env.rt.block_on(async {
                env.commands
                    .measure(
                        subject
                            .store
                            .ranked(DISCUSSION, None, sort, PageRequest::first(PAGE)),
                    )
                    .await
            });
            let first = first.expect("first page");
            assert_eq!(first.items.len(), PAGE.min(env.config.comments));
            eprintln!(
                "ranked N={}: {} {sort}: {}",
                env.config.comments,
                subject.name,
                bench_env::describe(&names)
            );
            cases.push((subject, sort, first.next));
        }
    }
    let mut group = c.benchmark_group("ranked");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(PAGE as u64));
    for (subject, sort, next) in &cases {
        let id = BenchmarkId::new(format!("{} {sort}", subject.name), env.config.comments);
        group.bench_with_input(id, sort, |b, &sort| {
            b.to_async(&env.rt).iter(|| async move {
                subject
                    .store
                    .ranked(DISCUSSION, None, sort, PageRequest::first(PAGE))
                    .await
                    .expect("page")
            });
        });
        if let Some(next) = next {
            let id = BenchmarkId::new(format!("{} {sort} next", subject.name), env.config.comments);
            group.bench_with_input(id, sort, |b, &sort| {
                b.to_async(&env.rt).iter(|| async move {
                    subject
                        .store
                        .ranked(
                            DISCUSSION,
                            None,
                            sort,
                            PageRequest::after(PAGE, next.clone()),
                        )
                        .await
                        .expect("page")
                });
            });
        }
    }
    group.finish();
}

fn main() {
    let started = Instant::now();
    let env = Env::new();
    let mut c = bench_env::criterion(Duration::from_secs(2));
    if bench_env::runs(&env.config.groups, "vote") {
        bench_vote(&mut c, &env);
    }
    if bench_env::runs(&env.config.groups, "ranked") {
        bench_ranked(&mut c, &env);
    }
    c.final_summary();
    eprintln!(
        "comment_votes benches done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
