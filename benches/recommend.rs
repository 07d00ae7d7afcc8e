//! "People you may know" on a generated graph with a power-law follower distribution: the
//! crate's read-time recommendations (`FollowGraph::recommendations`, by `find`s and, where the
//! server has it, by `$graphLookup`) against an incrementally maintained candidates collection
//! (`benches/support/maintained_candidates.rs`, written with plain driver calls as the crate
//! would), in commands and documents read per page, and in what each adds to a follow.
//!
//! ```text
//! cargo bench --bench recommend                                  # 1,000 users, a few minutes
//! MONGO_SOCIAL_BENCH_RECOMMEND_USERS=10000 MONGO_SOCIAL_BENCH_GROUPS=counts cargo bench --bench recommend
//! MONGODB_URI=mongodb://127.0.0.1:27017/ MONGO_SOCIAL_BENCH_RECOMMEND_USERS=10000 cargo bench --bench recommend
//! ```
//!
//! The graph (`benches/support/power_law.rs`): U users, each following a Pareto-distributed
//! number of others (mean about 10, at most 2,000) drawn by a Zipf law, so a few are followed
//! by a large part of the graph and most by a handful; 100 groups of Zipf-distributed sizes.
//! It is loaded in bulk into `mongo_social_bench_recommend_<U>` (dropped first), with the
//! documents the graph's own follows would leave.
//!
//! Groups:
//!
//! - `counts`: for R random readers and the reader who follows the most users, one page of 20
//!   recommendations each way (read time by `find`s, by `$graphLookup` where the server has it,
//!   by `find`s with a group boost; maintained: the stored ranking, after an untimed rebuild of
//!   the reader's candidates, itself counted), and for F random new follows, plus the celebrity
//!   following someone and someone following the celebrity: the follow itself and the
//!   maintenance the candidates collection needs after it (as a `JobQueue` job too, for one
//!   follow). Printed as Markdown tables of commands and documents read (returned by the
//!   server, counted by `CommandCounter`). Then the maintained state of every reader is checked
//!   against a rebuild.
//! - `read`: the time of one page for the first random reader, each way.
//! - `follow`: the time of a follow of a new pair, alone and with the candidates' maintenance.
//!
//! | variable | default |
//! |---|---|
//! | `MONGO_SOCIAL_BENCH_RECOMMEND_USERS` (U) | `1000` |
//! | `MONGO_SOCIAL_BENCH_RECOMMEND_READERS` (R) | `3` |
//! | `MONGO_SOCIAL_BENCH_RECOMMEND_FOLLOWS` (F) | `3` |
//! | `MONGO_SOCIAL_BENCH_GROUPS` (which groups run: `counts`, `read`, `follow`) | all |
//!
//! Criterion here: 10 flat samples, 1 s warm-up, 2 s measurement; the usual flags override them.
//! On FerretDB 1.24 (which scans the whole collection for any filter but `{_id: ..}`) the
//! default run took 2.7 minutes after the build on a busy 2-core VM; `counts` at 10,000 users on
//! mongo-java-server about 7 minutes.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use mongo_social::graph::{FollowGraph, RecommendOptions};
use mongo_social::jobs::{Job, JobHandler, JobQueue};
use mongo_social::PageRequest;
use mongo_social_lab::CommandCounter;
use mongodb::Database;
use tokio::runtime::Runtime;

#[path = "support/bench_env.rs"]
#[allow(dead_code)] // `list` serves the other benches
mod bench_env;

#[path = "support/power_law.rs"]
mod power_law;

#[path = "support/maintained_candidates.rs"]
mod maintained_candidates;

use maintained_candidates::Maintained;
use power_law::{Generated, Rng};

/// Recommendations per page.
const PAGE: usize = 20;

struct Env {
    rt: Runtime,
    commands: CommandCounter,
    db: Database,
    graph: Generated,
    by_finds: FollowGraph,
    by_graph_lookup: Option<FollowGraph>,
    boosted: FollowGraph,
    maintained: Maintained,
    readers: Vec<usize>,
    follows: usize,
    /// Pairs followed so far, to draw new ones.
    followed: Mutex<(Rng, BTreeSet<(usize, usize)>)>,
}

impl Env {
    fn new() -> Self {
        let users = bench_env::number("MONGO_SOCIAL_BENCH_RECOMMEND_USERS", 1_000);
        let readers = bench_env::number("MONGO_SOCIAL_BENCH_RECOMMEND_READERS", 3);
        let follows = bench_env::number("MONGO_SOCIAL_BENCH_RECOMMEND_FOLLOWS", 3);
        let (rt, client, commands, info) = bench_env::connect();
        eprintln!("server: {}", info.describe());
        let db = client.database(&format!("mongo_social_bench_recommend_{users}"));
        let started = Instant::now();
        let graph = power_law::generate(users, 10.0, 42);
        let capabilities = info.capabilities();
        let built = |options: RecommendOptions| {
            FollowGraph::builder(&db)
                .recommendations(options)
                .capabilities(capabilities)
                .build()
                .expect("graph")
        };
        let by_finds = built(RecommendOptions::default().graph_lookup(false));
        let by_graph_lookup = capabilities
            .graph_lookup
            .then(|| built(RecommendOptions::default()));
        let boosted = built(
            RecommendOptions::default()
                .graph_lookup(false)
                .group_boost(1),
        );
        let maintained = Maintained::new(&db, capabilities.max_update_statements);
        rt.block_on(async {
            db.drop().await.expect("drop");
            // Every graph once, so that no measured call creates them.
            for graph in [&by_finds, &boosted].into_iter().chain(&by_graph_lookup) {
                graph.create_indexes().await.expect("indexes");
            }
            maintained.create_indexes().await.expect("indexes");
            graph.load(&db).await.expect("load");
        });
        let celebrity = graph.celebrity();
        eprintln!(
            "graph: {users} users, {} follows; the most followed, {}, has {} followers; the most \
             following follows {}; {} users follow more than 100; loaded in {:.1} s",
            graph.edges(),
            graph.ids[celebrity],
            graph.followers[celebrity],
            graph.following.iter().map(Vec::len).max().unwrap_or(0),
            graph.following.iter().filter(|f| f.len() > 100).count(),
            started.elapsed().as_secs_f64()
        );
        let mut rng = Rng::new(7);
        let mut chosen: Vec<usize> = Vec::new();
        while chosen.len() < readers.min(users) {
            let reader = rng.below(users);
            if !chosen.contains(&reader) {
                chosen.push(reader);
            }
        }
        Self {
            rt,
            commands,
            db,
            graph,
            by_finds,
            by_graph_lookup,
            boosted,
            maintained,
            readers: chosen,
            follows,
            followed: Mutex::new((Rng::new(11), BTreeSet::new())),
        }
    }

    fn id(&self, user: usize) -> &str {
        &self.graph.ids[user]
    }

    /// The user who follows the most.
    fn heaviest_reader(&self) -> usize {
        (0..self.graph.ids.len())
            .max_by_key(|&i| self.graph.following[i].len())
            .expect("users")
    }

    /// A pair `(a, b)` that does not follow yet, never drawn before.
    fn new_pair(&self) -> (usize, usize) {
        let mut state = self.followed.lock().expect("pairs");
        let n = self.graph.ids.len();
        loop {
            let (a, b) = (state.0.below(n), state.0.below(n));
            if a != b && !self.graph.follows(a, b) && state.1.insert((a, b)) {
                return (a, b);
            }
        }
    }

    /// Runs `operation`, returning its output with the commands it sent and the documents they
    /// read.
    fn count<T>(&self, operation: impl std::future::Future<Output = T>) -> (T, Cost) {
        self.rt.block_on(async {
            self.commands.reset();
            let output = operation.await;
            let cost = Cost {
                names: self.commands.names(),
                documents: self.commands.documents_read(),
            };
            (output, cost)
        })
    }
}

#[derive(Clone, Debug, Default)]
struct Cost {
    names: Vec<String>,
    documents: usize,
}

/// Average and largest of several costs, as a table row.
fn summary(costs: &[Cost]) -> String {
    let n = costs.len().max(1) as f64;
    let commands: Vec<usize> = costs.iter().map(|c| c.names.len()).collect();
    let documents: Vec<usize> = costs.iter().map(|c| c.documents).collect();
    format!(
        "{:.1} (max {}) | {:.1} (max {})",
        commands.iter().sum::<usize>() as f64 / n,
        commands.iter().max().unwrap_or(&0),
        documents.iter().sum::<usize>() as f64 / n,
        documents.iter().max().unwrap_or(&0),
    )
}

fn one(cost: &Cost) -> String {
    format!("{} | {}", bench_env::describe(&cost.names), cost.documents)
}

fn counts(env: &Env) {
    let users = env.graph.ids.len();
    let heaviest = env.heaviest_reader();
    eprintln!(
        "\n### One page of {PAGE}, {users} users ({} random readers; the heaviest reader \
         follows {})\n",
        env.readers.len(),
        env.graph.following[heaviest].len()
    );
    eprintln!("| approach | reader | commands | documents read |");
    eprintln!("|---|---|---|---|");
    let mut ways: Vec<(&str, &FollowGraph)> = vec![("read time, finds", &env.by_finds)];
    if let Some(graph) = &env.by_graph_lookup {
        ways.push(("read time, $graphLookup", graph));
    }
    ways.push(("read time, finds, group boost", &env.boosted));
    for (name, graph) in &ways {
        let mut costs = Vec::new();
        for &reader in &env.readers {
            let (page, cost) =
                env.count(graph.recommendations(env.id(reader), PageRequest::first(PAGE)));
            page.expect("recommendations");
            costs.push(cost);
        }
        eprintln!("| {name} | random (avg) | {} |", summary(&costs));
        let (page, cost) =
            env.count(graph.recommendations(env.id(heaviest), PageRequest::first(PAGE)));
        page.expect("recommendations");
        eprintln!("| {name} | heaviest | {} |", one(&cost));
    }
    let mut rebuilds = Vec::new();
    let mut sizes = Vec::new();
    let mut pages = Vec::new();
    let mut all_readers = env.readers.clone();
    all_readers.push(heaviest);
    for &reader in &all_readers {
        let (stored, cost) = env.count(env.maintained.rebuild(env.id(reader)));
        sizes.push(stored.expect("rebuild"));
        rebuilds.push(cost);
        let (page, cost) = env.count(env.maintained.page(env.id(reader), PAGE));
        page.expect("page");
        pages.push(cost);
    }
    eprintln!(
        "| maintained | random (avg) | {} |",
        summary(&pages[..env.readers.len()])
    );
    eprintln!(
        "| maintained | heaviest | {} |",
        one(&pages[env.readers.len()])
    );
    eprintln!(
        "| maintained: rebuild one user's candidates | random (avg) | {} |",
        summary(&rebuilds[..env.readers.len()])
    );
    eprintln!(
        "\ncandidates stored per user (maintained): {:.0} on average over the random readers, {} \
         for the heaviest: about {:.1} M documents for the whole graph",
        sizes[..env.readers.len()].iter().sum::<usize>() as f64 / env.readers.len().max(1) as f64,
        sizes[env.readers.len()],
        sizes[..env.readers.len()].iter().sum::<usize>() as f64 / env.readers.len().max(1) as f64
            * users as f64
            / 1e6
    );

    eprintln!("\n### What a follow costs, {users} users\n");
    eprintln!(
        "| follow | the follow itself | maintained candidates after it: commands | documents \
         read | statements |"
    );
    eprintln!("|---|---|---|---|---|");
    let celebrity = env.graph.celebrity();
    let mut pairs: Vec<(String, (usize, usize))> = (0..env.follows)
        .map(|_| ("random".to_owned(), env.new_pair()))
        .collect();
    let mut rng = Rng::new(3);
    let fan = loop {
        let user = rng.below(users);
        if user != celebrity && !env.graph.follows(user, celebrity) {
            break user;
        }
    };
    let followed = loop {
        let user = rng.below(users);
        if user != celebrity && !env.graph.follows(celebrity, user) {
            break user;
        }
    };
    pairs.push(("someone follows the celebrity".to_owned(), (fan, celebrity)));
    pairs.push((
        format!(
            "the celebrity ({} followers) follows someone",
            env.graph.followers[celebrity]
        ),
        (celebrity, followed),
    ));
    let mut follow_costs = Vec::new();
    let mut maintenance = Vec::new();
    for (i, (name, (a, b))) in pairs.iter().enumerate() {
        let (new, follow) = env.count(env.by_finds.follow(env.id(*a), env.id(*b)));
        assert!(new.expect("follow"), "a new pair");
        let (work, cost) = env.count(env.maintained.on_follow(env.id(*a), env.id(*b)));
        let work = work.expect("maintenance");
        if i < env.follows {
            follow_costs.push(follow);
            maintenance.push((cost, work.statements));
        } else {
            eprintln!(
                "| {name} | {} | {} | {} | {} |",
                bench_env::describe(&follow.names),
                cost.names.len(),
                cost.documents,
                work.statements
            );
        }
    }
    // An unfollow undoes the same statements.
    let (a, b) = pairs.last().expect("the celebrity's follow").1;
    let (gone, _) = env.count(env.by_finds.unfollow(env.id(a), env.id(b)));
    assert!(gone.expect("unfollow"));
    let (work, cost) = env.count(env.maintained.on_unfollow(env.id(a), env.id(b)));
    eprintln!(
        "| the celebrity unfollows them again | (an unfollow) | {} | {} | {} |",
        cost.names.len(),
        cost.documents,
        work.expect("maintenance").statements
    );
    let n = maintenance.len().max(1) as f64;
    eprintln!(
        "| random (avg of {}) | {:.1} commands | {:.1} | {:.1} | {:.1} |",
        env.follows,
        follow_costs.iter().map(|c| c.names.len()).sum::<usize>() as f64 / n,
        maintenance
            .iter()
            .map(|(c, _)| c.names.len())
            .sum::<usize>() as f64
            / n,
        maintenance.iter().map(|(c, _)| c.documents).sum::<usize>() as f64 / n,
        maintenance.iter().map(|(_, s)| *s).sum::<usize>() as f64 / n,
    );

    // The same maintenance through the crate's job queue: the follow enqueues a job, a worker
    // runs it.
    let queue = JobQueue::builder(&env.db)
        .collection("jobs", "candidate_jobs")
        .build()
        .expect("queue");
    let (a, b) = env.new_pair();
    let (ids, enqueue) = env.count(async {
        env.by_finds
            .follow(env.id(a), env.id(b))
            .await
            .expect("follow");
        env.commands.reset();
        queue
            .enqueue("follow", bson::doc! { "a": env.id(a), "b": env.id(b) })
            .await
    });
    ids.expect("enqueue");
    let handler = MaintainOnFollow(env.maintained.clone());
    let (ran, job) = env.count(queue.run_pending(&handler));
    assert_eq!(ran.expect("run"), 1);
    eprintln!(
        "\nthrough a JobQueue: the follow adds {}; the job costs {} ({} documents read)",
        bench_env::describe(&enqueue.names),
        bench_env::describe(&job.names),
        job.documents
    );

    let agree = env.rt.block_on(async {
        let mut agree = 0;
        for &reader in &all_readers {
            if env
                .maintained
                .agrees_with_rebuild(env.id(reader))
                .await
                .expect("compare")
            {
                agree += 1;
            }
        }
        agree
    });
    eprintln!(
        "maintained candidates equal a rebuild for {agree} of {} readers after the follows\n",
        all_readers.len()
    );
    assert_eq!(agree, all_readers.len(), "the maintenance is exact");
}

/// Runs the candidates' maintenance for a follow, as a job.
#[derive(Debug)]
struct MaintainOnFollow(Maintained);

#[async_trait::async_trait]
impl JobHandler for MaintainOnFollow {
    async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
        let pair = (job.payload.get_str("a"), job.payload.get_str("b"));
        let (Ok(a), Ok(b)) = pair else {
            return Err(job.error("a follow job names a and b"));
        };
        self.0
            .on_follow(a, b)
            .await
            .map(drop)
            .map_err(|error| job.error(error))
    }
}

fn bench_read(c: &mut Criterion, env: &Env) {
    let users = env.graph.ids.len();
    let reader = env.id(env.readers[0]).to_owned();
    env.rt
        .block_on(env.maintained.rebuild(&reader))
        .expect("rebuild");
    let mut group = c.benchmark_group("read");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(PAGE as u64));
    let mut ways: Vec<(&str, &FollowGraph)> = vec![("read time, finds", &env.by_finds)];
    if let Some(graph) = &env.by_graph_lookup {
        ways.push(("read time, $graphLookup", graph));
    }
    for (name, graph) in ways {
        group.bench_with_input(BenchmarkId::new(name, users), &users, |b, _| {
            b.to_async(&env.rt).iter(|| async {
                graph
                    .recommendations(&reader, PageRequest::first(PAGE))
                    .await
                    .expect("recommendations")
            });
        });
    }
    group.bench_with_input(BenchmarkId::new("maintained", users), &users, |b, _| {
        b.to_async(&env.rt)
            .iter(|| async { env.maintained.page(&reader, PAGE).await.expect("page") });
    });
    group.finish();
}

fn bench_follow(c: &mut Criterion, env: &Env) {
    let users = env.graph.ids.len();
    let mut group = c.benchmark_group("follow");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(1));
    for (name, maintain) in [("follow", false), ("follow + maintained candidates", true)] {
        group.bench_with_input(BenchmarkId::new(name, users), &users, |b, _| {
            b.to_async(&env.rt).iter_custom(|iters| async move {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let (a, b) = env.new_pair();
                    let (a, b) = (env.id(a), env.id(b));
                    let started = Instant::now();
                    env.by_finds.follow(a, b).await.expect("follow");
                    if maintain {
                        env.maintained.on_follow(a, b).await.expect("maintenance");
                    }
                    spent += started.elapsed();
                }
                spent
            });
        });
    }
    group.finish();
}

fn main() {
    let started = Instant::now();
    let env = Env::new();
    let groups = bench_env::groups();
    if bench_env::runs(&groups, "counts") {
        counts(&env);
    }
    let mut c = bench_env::criterion(Duration::from_secs(2));
    if bench_env::runs(&groups, "read") {
        bench_read(&mut c, &env);
    }
    if bench_env::runs(&groups, "follow") {
        bench_follow(&mut c, &env);
    }
    c.final_summary();
    eprintln!(
        "recommend benches done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
