//! The three comment designs head to head: posting into a discussion, and reading a page of it
//! near the start and near the end, with the MongoDB manual's own algorithms
//! (`benches/support/seed_comments.rs`, implemented literally with plain driver calls) as
//! sibling baselines.
//!
//! ```text
//! cargo bench --bench comments                                # local FerretDB, small sizes
//! MONGODB_URI=mongodb://127.0.0.1:27017/ MONGO_SOCIAL_BENCH_SCALE=full cargo bench --bench comments
//! ```
//!
//! Every (group, design, M) gets its own database, `mongo_social_bench_comments_<group>_<design>_m<M>`,
//! dropped before it is filled (on FerretDB 1.x every query but `{_id: x}` scans its whole
//! collection, so sharing one would measure the neighbours). Discussions are filled with M
//! top-level comments of 64 characters from 8 authors, the six designs' discussions at the same
//! time (untimed): our designs through the store's `post`,
//! `MONGO_SOCIAL_BENCH_FILL_TASKS` at a time (one at a time for embedded and hybrid pages on a
//! server without atomic updates, where a discussion lock serialises them anyway); the seed
//! baselines through their own post (per-comment concurrently; embedded concurrently only where
//! updates are atomic; hybrid one at a time, as the manual's page counter is racy).
//!
//! Groups:
//!
//! - `post`: one comment posted into a discussion that holds M comments at the start
//!   (`<design> post/M`), and for the threaded designs one reply to a top-level comment
//!   (`<design> reply/M`, each reply to another comment of the fill). Seed baselines:
//!   `seed per-comment` (an `insert`; a reply finds its parent by slug first), `seed embedded`
//!   (`$push`), `seed hybrid` (read the discussion, upserting `findAndModify` on the last page,
//!   and the page counter `update` when a page passes 100). Timed posts accumulate: after each
//!   benchmark a line gives the average commands per post it timed and the discussion's size
//!   at the end. Throughput: 1 element.
//! - `page`: 50 comments of a discussion of M comments, `<design> <view> <where>/M` with view
//!   `chronological` or `threaded` (threaded designs only) and where `first` (offset 0) or `end`
//!   (offset M - 50, the last 50). Our designs read keyset pages: the `end` cursor is found
//!   once, untimed, by paging through. The seeds read `skip`-based pages (`page_num = M / 50 -
//!   1`): per-comment `sort` + `skip` + `limit`; embedded `$slice: [skip, 50]` (threaded: the
//!   whole document, paged client-side); hybrid walks the pages from the first, one query each,
//!   subtracting counts from `skip`. Comparing `first` with `end` and one M with the next shows
//!   whether a design's cost stays flat. An embedded discussion must fit one 16 MiB document:
//!   an M that would not is skipped, with the reason printed. Throughput: 50 elements.
//!
//! Before each group, one line per (design, operation, M) gives the commands one operation sent,
//! as a [`CommandCounter`] on the bench client saw them. On a server without `$slice` projections
//! (FerretDB 1.x) a line says that the seed's embedded and hybrid pages read whole documents and
//! slice them client-side (our embedded design does the same there).
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
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use futures::StreamExt;
use mongo_social::comments::{
    Author, CommentCursor, CommentQuery, CommentStore, Embedded, HybridPages, NewComment,
    PerComment,
};
use mongo_social::testing::CommandCounter;
use mongodb::{Client, Database};
use tokio::runtime::Runtime;

#[path = "support/bench_env.rs"]
mod bench_env;

#[path = "support/seed_comments.rs"]
mod seed_comments;

use seed_comments::{SeedComments, SeedServer, SeedView};

/// Comments per page read in the `page` group.
const PAGE: usize = 50;
/// The discussion every subject posts to and reads.
const DISCUSSION: &str = "article-1";
/// Authors taking turns.
const AUTHORS: u64 = 8;
/// The 16 MiB document limit an embedded discussion must fit, less the 64 KiB our embedded
/// design keeps for the application's own fields.
const EMBEDDED_MAX_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;
/// Bytes an embedded comment costs its document beyond its encoding (array index key, and some
/// slack), as our embedded design counts them.
const EMBEDDED_ELEMENT_OVERHEAD: usize = 32;

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
    /// Whether the server's single-document updates are atomic (MongoDB; not FerretDB 1.x).
    atomic_updates: bool,
    /// What the seed baselines may ask of the server.
    seed_server: SeedServer,
}

impl Env {
    fn new() -> Self {
        let config = Config::from_env();
        let (rt, client, commands, info) = bench_env::connect();
        let capabilities = info.capabilities();
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
            atomic_updates: capabilities.atomic_updates,
            seed_server: SeedServer {
                slice_projection: capabilities.slice_projection,
                find_and_modify_projection: capabilities.find_and_modify_projection,
            },
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

/// What is measured: one of our designs or one of the manual's.
enum Kind {
    Ours(Arc<dyn CommentStore>),
    Seed(SeedComments),
}

/// A design in its own database.
struct Subject {
    kind: Kind,
    db: Database,
    name: &'static str,
}

/// Which order a page is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    Chronological,
    Threaded,
}

impl View {
    fn name(self) -> &'static str {
        match self {
            View::Chronological => "chronological",
            View::Threaded => "threaded",
        }
    }

    fn seed(self) -> SeedView {
        match self {
            View::Chronological => SeedView::Chronological,
            View::Threaded => SeedView::Threaded,
        }
    }
}

/// One page to read: where it starts, and how each kind of subject gets there.
struct PageCase {
    view: View,
    /// `first` or `end`.
    place: &'static str,
    /// Our designs: the keyset cursor before the page (`None` for the first page).
    cursor: Option<CommentCursor>,
    /// The seeds: `page_num` for `skip(page_num * 50)`.
    page_num: usize,
}

/// Comment `i`: a 64-character text.
fn text(i: u64) -> String {
    format!("{:.<64}", format!("comment {i} by user{} ", i % AUTHORS))
}

/// The author of comment `i`.
fn author(i: u64) -> Author {
    let user = i % AUTHORS;
    Author::new(format!("user{user}"), format!("User {user}"))
}

/// The manual's `author_info`: `{id, name}`.
fn seed_author(i: u64) -> Document {
    let author = author(i);
    doc! { "id": author.id, "name": author.name }
}

/// Our three designs and the manual's three, each in the (dropped) database
/// `mongo_social_bench_comments_<group>_<design>_m<m>`.
fn subjects(env: &Env, group: &str, m: u64) -> Vec<Subject> {
    let database = |name: &str| {
        let design = name.replace([' ', '-'], "_");
        env.database(&format!("{group}_{design}_m{m}"))
    };
    let mut subjects = Vec::new();
    for name in ["per-comment", "embedded", "hybrid-pages"] {
        let db = database(name);
        let store: Arc<dyn CommentStore> = match name {
            "per-comment" => Arc::new(PerComment::new(&db)),
            "embedded" => Arc::new(Embedded::new(&db)),
            _ => Arc::new(HybridPages::new(&db)),
        };
        debug_assert_eq!(store.design().name(), name);
        subjects.push(Subject {
            kind: Kind::Ours(store),
            db,
            name,
        });
    }
    for seed in SeedComments::ALL {
        subjects.push(Subject {
            kind: Kind::Seed(seed),
            db: database(seed.name()),
            name: seed.name(),
        });
    }
    subjects
}

impl Subject {
    fn threaded(&self) -> bool {
        match &self.kind {
            Kind::Ours(store) => store.threaded().is_some(),
            Kind::Seed(seed) => seed.threaded(),
        }
    }

    fn is_embedded(&self) -> bool {
        match &self.kind {
            Kind::Ours(store) => store.design().name() == "embedded",
            Kind::Seed(seed) => *seed == SeedComments::Embedded,
        }
    }

    /// Indexes and the discussion.
    async fn setup(&self) {
        match &self.kind {
            Kind::Ours(store) => {
                store.create_indexes().await.expect("create indexes");
                store
                    .create_discussion(DISCUSSION)
                    .await
                    .expect("create the discussion");
            }
            Kind::Seed(seed) => {
                seed.create_indexes(&self.db).await.expect("create indexes");
                seed.create_discussion(&self.db, DISCUSSION)
                    .await
                    .expect("create the discussion");
            }
        }
    }

    /// Posts top-level comment `i`; returns its link where the design hands one back.
    async fn post(&self, env: &Env, i: u64) -> Option<String> {
        match &self.kind {
            Kind::Ours(store) => Some(
                store
                    .post(DISCUSSION, NewComment::new(author(i), text(i)))
                    .await
                    .expect("post")
                    .link,
            ),
            Kind::Seed(seed) => seed
                .post(
                    &self.db,
                    env.seed_server,
                    DISCUSSION,
                    &seed_author(i),
                    &text(i),
                )
                .await
                .expect("post"),
        }
    }

    /// Posts comment `i` as a reply to `parent`.
    async fn reply(&self, parent: &str, i: u64) {
        match &self.kind {
            Kind::Ours(store) => {
                store
                    .threaded()
                    .expect("a threaded design")
                    .reply(DISCUSSION, parent, NewComment::new(author(i), text(i)))
                    .await
                    .expect("reply");
            }
            Kind::Seed(seed) => {
                seed.reply(&self.db, DISCUSSION, parent, &seed_author(i), &text(i))
                    .await
                    .expect("reply");
            }
        }
    }

    /// How many posts may run at once while filling without breaking the design.
    fn fill_tasks(&self, env: &Env) -> usize {
        let concurrent = match &self.kind {
            Kind::Ours(store) => store.design().name() == "per-comment" || env.atomic_updates,
            Kind::Seed(SeedComments::PerComment) => true,
            Kind::Seed(SeedComments::Embedded) => env.atomic_updates,
            Kind::Seed(SeedComments::Hybrid) => false,
        };
        if concurrent {
            env.config.fill_tasks
        } else {
            1
        }
    }

    /// Sets the design up and posts `m` top-level comments; returns their links (positions for
    /// the seed's embedded design).
    async fn fill(&self, env: &Env, m: u64) -> Vec<String> {
        self.setup().await;
        let links: Vec<Option<String>> = futures::stream::iter(0..m)
            .map(|i| self.post(env, i))
            .buffer_unordered(self.fill_tasks(env))
            .collect()
            .await;
        let links: Vec<String> = links.into_iter().flatten().collect();
        if let Kind::Ours(store) = &self.kind {
            assert_eq!(store.count(DISCUSSION).await.expect("count"), m);
        }
        if links.is_empty() && self.threaded() {
            // The seed's embedded design: position paths.
            (0..m).map(|i| i.to_string()).collect()
        } else {
            links
        }
    }

    /// The page `case` describes; returns how many comments it held.
    async fn read(&self, env: &Env, case: &PageCase) -> usize {
        match &self.kind {
            Kind::Ours(store) => {
                let mut query = CommentQuery::oldest_first(PAGE);
                if let Some(cursor) = &case.cursor {
                    query = query.after(cursor.clone());
                }
                let page = match case.view {
                    View::Chronological => store.chronological(DISCUSSION, &query).await,
                    View::Threaded => {
                        store
                            .threaded()
                            .expect("a threaded design")
                            .thread_page(DISCUSSION, &query)
                            .await
                    }
                };
                page.expect("page").comments.len()
            }
            Kind::Seed(seed) => seed
                .page(
                    &self.db,
                    env.seed_server,
                    DISCUSSION,
                    case.view.seed(),
                    case.page_num,
                    PAGE,
                )
                .await
                .expect("page")
                .len(),
        }
    }

    /// Our designs: the cursor after the first `offset` comments of `view`, found by paging
    /// through (up to 1,000 comments a page).
    async fn cursor_at(&self, view: View, offset: usize) -> Option<CommentCursor> {
        let Kind::Ours(store) = &self.kind else {
            return None;
        };
        let mut cursor = None;
        let mut remaining = offset;
        while remaining > 0 {
            let take = remaining.min(CommentQuery::MAX_LIMIT);
            let mut query = CommentQuery::oldest_first(take);
            if let Some(cursor) = cursor.take() {
                query = query.after(cursor);
            }
            let page = match view {
                View::Chronological => store.chronological(DISCUSSION, &query).await,
                View::Threaded => {
                    store
                        .threaded()
                        .expect("a threaded design")
                        .thread_page(DISCUSSION, &query)
                        .await
                }
            }
            .expect("page through");
            assert_eq!(page.comments.len(), take, "{} {}", self.name, view.name());
            cursor = page.next;
            remaining -= take;
        }
        cursor
    }

    /// The bytes one comment of this embedded design adds to the discussion document.
    fn embedded_comment_bytes(&self) -> usize {
        let comment = match &self.kind {
            // Our embedded node: id, posted, author, text, deleted.
            Kind::Ours(_) => doc! {
                "id": bson::oid::ObjectId::new(),
                "posted": bson::DateTime::now(),
                "author": seed_author(0),
                "text": text(100_000),
                "deleted": false,
            },
            Kind::Seed(_) => doc! {
                "posted": bson::DateTime::now(),
                "author": seed_author(0),
                "text": text(100_000),
            },
        };
        bson::to_vec(&comment).expect("encode").len() + EMBEDDED_ELEMENT_OVERHEAD
    }
}

/// `4 commands [insert, find, update x2]`: the count and the names, repeats folded.
fn describe(names: &[String]) -> String {
    let mut runs: Vec<(String, usize)> = Vec::new();
    for name in names {
        match runs.last_mut() {
            Some((last, count)) if last == name => *count += 1,
            _ => runs.push((name.clone(), 1)),
        }
    }
    let folded: Vec<String> = runs
        .into_iter()
        .map(|(name, count)| {
            if count == 1 {
                name
            } else {
                format!("{name} x{count}")
            }
        })
        .collect();
    let plural = if names.len() == 1 { "" } else { "s" };
    format!("{} command{plural} [{}]", names.len(), folded.join(", "))
}

/// The note printed when the server has no `$slice` projection.
fn no_slice_note(env: &Env, group: &str) {
    if !env.seed_server.slice_projection {
        eprintln!(
            "{group}: this server has no $slice projection: the seed's embedded and hybrid pages \
             (and our embedded design) read whole documents and slice them client-side"
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
    async fn run(&self, env: &Env, op: Op) {
        let i = self.next.get();
        self.next.set(i + 1);
        match op {
            Op::Post => {
                self.subject.post(env, i).await;
            }
            Op::Reply => {
                // Spread replies over the fill's comments, so no thread grows much.
                let parent = &self.links[(i as usize * 7) % self.links.len()];
                self.subject.reply(parent, i).await;
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
                let links = subject.fill(env, m).await;
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
        let ops: &[Op] = if p.subject.threaded() {
            &[Op::Post, Op::Reply]
        } else {
            &[Op::Post]
        };
        for &op in ops {
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
                describe(&names)
            );
        }
    }

    let mut group = c.benchmark_group("post");
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(1));
    for p in &postings {
        let ops: &[Op] = if p.subject.threaded() {
            &[Op::Post, Op::Reply]
        } else {
            &[Op::Post]
        };
        for &op in ops {
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
    let mut cases: Vec<(u64, Subject, Vec<PageCase>)> = Vec::new();
    for &m in &env.config.page_m {
        let mut fitting = Vec::new();
        for subject in subjects(env, "page", m) {
            if subject.is_embedded() {
                let per_comment = subject.embedded_comment_bytes();
                let bytes = per_comment as u64 * m;
                if bytes > EMBEDDED_MAX_BYTES as u64 {
                    eprintln!(
                        "page M={m}: {} skipped: {m} comments of about {per_comment} bytes each \
                         (encoded, with array overhead) come to about {:.1} MiB, past the 16 MiB \
                         document limit less 64 KiB (room for about {} comments)",
                        subject.name,
                        bytes as f64 / (1024.0 * 1024.0),
                        EMBEDDED_MAX_BYTES / per_comment,
                    );
                    continue;
                }
            }
            fitting.push(subject);
        }
        let fills = fill_all(env, &fitting, m);
        for (subject, (_, filled)) in fitting.into_iter().zip(fills) {
            let views: &[View] = if subject.threaded() {
                &[View::Chronological, View::Threaded]
            } else {
                &[View::Chronological]
            };
            let end = (m as usize).saturating_sub(PAGE);
            let mut subject_cases = Vec::new();
            for &view in views {
                for (place, offset) in [("first", 0), ("end", end)] {
                    if place == "end" && offset == 0 {
                        continue;
                    }
                    let cursor = env.rt.block_on(subject.cursor_at(view, offset));
                    subject_cases.push(PageCase {
                        view,
                        place,
                        cursor,
                        page_num: offset / PAGE,
                    });
                }
            }
            for case in &subject_cases {
                let (len, names) = env.rt.block_on(async {
                    // The first read detects the server; the second is a steady one.
                    subject.read(env, case).await;
                    env.commands.measure(subject.read(env, case)).await
                });
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
                    describe(&names),
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
                    .iter(|| async { subject.read(env, case).await });
            });
        }
    }
    group.finish();
}

fn main() {
    let started = Instant::now();
    let env = Env::new();
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
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
