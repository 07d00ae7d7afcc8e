//! The load run's core, shared by `examples/load` and `tests/load.rs`: the stores, the seeding,
//! the concurrent clients and what they record (every call's latency and outcome, and the
//! ledger of every acknowledged or failed write that `check.rs` verifies afterwards).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};
use mongo_social::comments::{
    Author, DynCommentStore, Embedded, HybridPages, NewComment, Order, PerComment,
    Strategy as CommentStrategy, Vote,
};
use mongo_social::inbox::{DynInboxLifecycle, Strategy as InboxStrategy, UpTo};
use mongo_social::{
    inbox::MessageId, retry::RetryPolicy, server::ServerInfo, BucketedFanOut, Cursor, FanOutOnRead,
    FanOutOnWrite, NewMessage, PageRequest,
};
use mongo_social_lab::{self as testing, fault_proxy::FaultProxy, CommandCounter};
use mongodb::options::{ClientOptions, ServerAddress};
use mongodb::Client;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type BoxResult<T> = Result<T, BoxError>;

/// The operations a client makes, as the report names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// The newest page of the user's inbox.
    Page,
    /// The page after the last one the user read, through its cursor.
    NextPage,
    /// The user's unread count.
    Unread,
    /// A message from the user to 1 to 100 others.
    Send,
    /// `mark_read` of one message of a page the user read.
    MarkRead,
    /// `mark_read_up_to` a message of a page the user read, or that page's cursor.
    MarkUpTo,
    /// A top-level comment by the user.
    Post,
    /// A page of a discussion's comments, oldest or newest first.
    Comments,
    /// The user's vote on a comment: up, down, or taken back.
    Vote,
}

impl Op {
    /// Every operation, in the order of the report (and of each client's first round).
    pub const ALL: [Op; 9] = [
        Op::Page,
        Op::NextPage,
        Op::Unread,
        Op::Send,
        Op::MarkRead,
        Op::MarkUpTo,
        Op::Post,
        Op::Comments,
        Op::Vote,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Page => "inbox page",
            Op::NextPage => "inbox next page",
            Op::Unread => "unread count",
            Op::Send => "send",
            Op::MarkRead => "mark read",
            Op::MarkUpTo => "mark read up to",
            Op::Post => "comment post",
            Op::Comments => "comment page",
            Op::Vote => "vote",
        }
    }
}

/// The share of each kind of operation, as weights (any scale).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    /// Inbox pages: the newest page, or (a quarter of the time, when the last page read has
    /// one) the next page through its cursor.
    pub pages: u32,
    /// Unread counts.
    pub unread: u32,
    /// Sends to 1 to `max_recipients` recipients.
    pub send: u32,
    /// Marks read: half `mark_read` of one message, half `mark_read_up_to`.
    pub mark: u32,
    /// Comments: half posts, half pages.
    pub comments: u32,
    /// Votes on comments.
    pub votes: u32,
}

impl Default for Mix {
    /// 45 % inbox pages, 15 % unread counts, 20 % sends, 5 % marks read, 10 % comments, 5 %
    /// votes.
    fn default() -> Self {
        Self {
            pages: 45,
            unread: 15,
            send: 20,
            mark: 5,
            comments: 10,
            votes: 5,
        }
    }
}

impl Mix {
    /// Parses `pages=45,unread=15,send=20,mark=5,comments=10,votes=5` (names left out weigh 0).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut mix = Mix {
            pages: 0,
            unread: 0,
            send: 0,
            mark: 0,
            comments: 0,
            votes: 0,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("a mix entry is name=weight, not {part:?}"))?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| format!("the weight of {name:?} must be a whole number"))?;
            let slot = match name.trim() {
                "pages" => &mut mix.pages,
                "unread" => &mut mix.unread,
                "send" => &mut mix.send,
                "mark" => &mut mix.mark,
                "comments" => &mut mix.comments,
                "votes" => &mut mix.votes,
                other => {
                    return Err(format!(
                        "unknown mix entry {other:?}: use pages, unread, send, mark, comments, \
                         votes"
                    ))
                }
            };
            *slot = weight;
        }
        if mix.total() == 0 {
            return Err("the mix weighs nothing".to_owned());
        }
        Ok(mix)
    }

    fn total(&self) -> u32 {
        self.pages + self.unread + self.send + self.mark + self.comments + self.votes
    }

    /// An operation drawn by the weights (`next` says whether a next page can be read).
    fn pick(&self, rng: &mut Rng, next: bool) -> Op {
        let mut ticket = rng.below(self.total() as usize) as u32;
        let mut take = |weight: u32| {
            if ticket < weight {
                true
            } else {
                ticket -= weight;
                false
            }
        };
        if take(self.pages) {
            if next && rng.chance(0.25) {
                Op::NextPage
            } else {
                Op::Page
            }
        } else if take(self.unread) {
            Op::Unread
        } else if take(self.send) {
            Op::Send
        } else if take(self.mark) {
            if rng.chance(0.5) {
                Op::MarkRead
            } else {
                Op::MarkUpTo
            }
        } else if take(self.comments) {
            if rng.chance(0.5) {
                Op::Post
            } else {
                Op::Comments
            }
        } else {
            Op::Vote
        }
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pages={},unread={},send={},mark={},comments={},votes={}",
            self.pages, self.unread, self.send, self.mark, self.comments, self.votes
        )
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Concurrent clients (tokio tasks), each acting for its own share of the users.
    pub clients: usize,
    /// How long the clients start operations.
    pub duration: Duration,
    /// Users (`user0000`, ...).
    pub users: usize,
    pub inbox: InboxStrategy,
    pub comments: CommentStrategy,
    pub mix: Mix,
    /// The seed of every client's random numbers.
    pub seed: u64,
    /// An outage at half time, through a [`FaultProxy`]: every connection cut, new ones
    /// refused for this long.
    pub fault: Option<Duration>,
    /// Messages and comments per page.
    pub page: usize,
    /// Messages in each user's inbox before the run.
    pub seed_messages: usize,
    /// Discussions, each registered and given `seed_comments` comments before the run.
    pub discussions: usize,
    pub seed_comments: usize,
    /// The most recipients of one send.
    pub max_recipients: usize,
    /// The database, dropped before the run.
    pub database: String,
    /// How often progress is written to stderr.
    pub progress: Duration,
    /// The retry policy of the stores under load, whose budget also bounds the client's server
    /// selection and connect timeouts (`RetryPolicy::apply_to`).
    pub retry: RetryPolicy,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            clients: 16,
            duration: Duration::from_secs(60),
            users: 200,
            inbox: InboxStrategy::BucketedFanOut,
            comments: CommentStrategy::PerComment,
            mix: Mix::default(),
            seed: 1,
            fault: None,
            page: 50,
            seed_messages: 20,
            discussions: 10,
            seed_comments: 20,
            max_recipients: 100,
            database: testing::database_name("load"),
            progress: Duration::from_secs(5),
            retry: RetryPolicy::default(),
        }
    }
}

impl Config {
    fn validate(&self) -> BoxResult<()> {
        if self.clients == 0 {
            return Err("at least one client is needed".into());
        }
        if self.users < 2 || self.users < self.clients {
            return Err(format!(
                "{} users are too few: at least 2, and at least one per client ({})",
                self.users, self.clients
            )
            .into());
        }
        if self.discussions == 0 || self.max_recipients == 0 {
            return Err("at least one discussion and one recipient per send are needed".into());
        }
        if !(1..=PageRequest::MAX_LIMIT).contains(&self.page) {
            return Err(format!("a page holds 1 to {} items", PageRequest::MAX_LIMIT).into());
        }
        Ok(())
    }

    /// The users' names.
    pub fn user_names(&self) -> Vec<String> {
        (0..self.users).map(|u| format!("user{u:04}")).collect()
    }

    /// The discussions' ids.
    pub fn discussion_ids(&self) -> Vec<String> {
        (0..self.discussions)
            .map(|d| format!("article-{d:03}"))
            .collect()
    }
}

/// The inbox strategy named `name` (`bucketed-fan-out`, `fan-out-on-write`, `fan-out-on-read`).
pub fn inbox_strategy(name: &str) -> Result<InboxStrategy, String> {
    let all = [
        InboxStrategy::BucketedFanOut,
        InboxStrategy::FanOutOnWrite,
        InboxStrategy::FanOutOnRead,
    ];
    all.into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| format!("no inbox strategy {name:?}: use one of {}", names(&all)))
}

/// The comment strategy named `name` (`per-comment`, `embedded`, `hybrid-pages`).
pub fn comment_strategy(name: &str) -> Result<CommentStrategy, String> {
    let all = [
        CommentStrategy::PerComment,
        CommentStrategy::Embedded,
        CommentStrategy::HybridPages,
    ];
    all.into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| format!("no comment strategy {name:?}: use one of {}", names(&all)))
}

fn names<T: std::fmt::Display>(all: &[T]) -> String {
    all.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The stores under load.
#[derive(Clone)]
pub struct Stores {
    pub inbox: Arc<DynInboxLifecycle<String>>,
    pub comments: Arc<DynCommentStore>,
}

/// The configured strategies on `db`, retrying under `retry`.
pub fn stores(db: &mongodb::Database, config: &Config, retry: RetryPolicy) -> BoxResult<Stores> {
    let inbox: Arc<DynInboxLifecycle<String>> = match config.inbox {
        InboxStrategy::BucketedFanOut => Arc::new(
            BucketedFanOut::<String>::builder(db)
                .retry_policy(retry)
                .build()?,
        ),
        InboxStrategy::FanOutOnWrite => Arc::new(
            FanOutOnWrite::<String>::builder(db)
                .retry_policy(retry)
                .build()?,
        ),
        InboxStrategy::FanOutOnRead => Arc::new(
            FanOutOnRead::<String>::builder(db)
                .retry_policy(retry)
                .build()?,
        ),
        other => return Err(format!("inbox strategy {other} is not known here").into()),
    };
    let comments: Arc<DynCommentStore> = match config.comments {
        CommentStrategy::PerComment => {
            Arc::new(PerComment::builder(db).retry_policy(retry).build()?)
        }
        CommentStrategy::Embedded => Arc::new(Embedded::builder(db).retry_policy(retry).build()?),
        CommentStrategy::HybridPages => {
            Arc::new(HybridPages::builder(db).retry_policy(retry).build()?)
        }
        other => return Err(format!("comment strategy {other} is not known here").into()),
    };
    Ok(Stores { inbox, comments })
}

/// The server's URI (`MONGODB_URI`, or the fixture's local server, started here).
pub async fn server_uri() -> BoxResult<&'static str> {
    Ok(tokio::task::spawn_blocking(testing::server_uri).await?)
}

/// A client of the server, directly, with `retry`'s timeouts (and `commands` counting its
/// commands, if given).
pub async fn direct_client(
    uri: &str,
    retry: RetryPolicy,
    commands: Option<&CommandCounter>,
) -> BoxResult<Client> {
    let mut options = ClientOptions::parse(uri).await?;
    retry.apply_to(&mut options);
    if let Some(commands) = commands {
        commands.attach(&mut options);
    }
    Ok(Client::with_options(options)?)
}

/// SplitMix64: a small deterministic generator, one per client.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A number in `1..=max`, log-uniform: as many sends to 1-9 recipients as to 10-99.
    pub fn log_uniform(&mut self, max: usize) -> usize {
        let max = max.max(1);
        let x = ((max as f64 + 1.0).ln() * self.unit()).exp().floor() as usize;
        x.clamp(1, max)
    }

    /// `k` distinct items of `from`, in random order.
    pub fn sample<T: Clone>(&mut self, from: &[T], k: usize) -> Vec<T> {
        let mut pool: Vec<usize> = (0..from.len()).collect();
        let k = k.min(pool.len());
        for i in 0..k {
            let j = i + self.below(pool.len() - i);
            pool.swap(i, j);
        }
        pool[..k].iter().map(|&i| from[i].clone()).collect()
    }
}

/// One timed call.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub op: Op,
    /// When the call was made, from the start of the run.
    pub start: Duration,
    /// From the call to its result.
    pub latency: Duration,
    /// The error's kind (`Error::kind`), if it failed.
    pub error: Option<&'static str>,
    /// Recipients, for a send.
    pub size: usize,
}

/// A send, with what it returned: the message id and the skipped recipients, or the error's
/// kind.
#[derive(Clone, Debug)]
pub struct SendRecord {
    /// The first word of the payload, unique to the send: how a failed send is recognised.
    pub token: String,
    pub to: Vec<String>,
    pub outcome: Result<(MessageId, Vec<String>), &'static str>,
    /// Sent while seeding, before the run.
    pub seed: bool,
}

/// A comment post: its link, or the error's kind.
#[derive(Clone, Debug)]
pub struct PostRecord {
    pub discussion: String,
    /// The first word of the text, unique to the post.
    pub token: String,
    pub outcome: Result<String, &'static str>,
    pub seed: bool,
}

/// A vote (`vote` `None`: taken back), with the previous vote it reported, or the error's kind.
#[derive(Clone, Debug)]
pub struct VoteRecord {
    pub discussion: String,
    pub link: String,
    pub user: String,
    pub vote: Option<Vote>,
    pub outcome: Result<Option<Vote>, &'static str>,
}

/// Every write of the run and of its seeding, each client's in the order it made them.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    pub sends: Vec<SendRecord>,
    pub posts: Vec<PostRecord>,
    pub votes: Vec<VoteRecord>,
}

impl Ledger {
    fn append(&mut self, other: Ledger) {
        self.sends.extend(other.sends);
        self.posts.extend(other.posts);
        self.votes.extend(other.votes);
    }
}

/// The outage, as the run saw it.
#[derive(Clone, Copy, Debug)]
pub struct Outage {
    /// When connections were cut, from the start of the run.
    pub start: Duration,
    /// When new connections were accepted again.
    pub end: Duration,
    /// Connections the proxy had accepted before the cut, and by the end of the run.
    pub accepted_before: u64,
    pub accepted: u64,
    /// Connections it refused.
    pub refused: u64,
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    pub server: String,
    pub samples: Vec<Sample>,
    pub ledger: Ledger,
    /// How long the clients started operations.
    pub duration: Duration,
    /// Until the last call in flight at the deadline returned.
    pub drained: Duration,
    /// Dropping, indexes and seeding.
    pub setup: Duration,
    pub outage: Option<Outage>,
    /// The first error message of each operation and kind.
    pub error_examples: Vec<(Op, &'static str, String)>,
    /// The commands the run's calls sent (not the seeding's), by name.
    pub commands: std::collections::BTreeMap<String, usize>,
}

/// The text of a message or comment: its unique token, then some words.
fn text(token: &str) -> String {
    format!(
        "{token} lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor"
    )
}

/// The token of a text made by [`text`].
pub fn token_of(text: &str) -> &str {
    text.split(' ').next().unwrap_or("")
}

#[derive(Default)]
struct Counters {
    ops: AtomicU64,
    errors: AtomicU64,
}

/// Runs `config`: drops the database, creates the indexes, seeds the inboxes and discussions,
/// then runs the clients until the deadline (with the outage at half time, when configured).
pub async fn run(config: &Config) -> BoxResult<Outcome> {
    config.validate()?;
    let uri = server_uri().await?;
    let proxy = match config.fault {
        Some(_) => Some(Arc::new(start_proxy(uri).await?)),
        None => None,
    };
    // One client for every task, as an application has: through the proxy when it is there.
    let commands = CommandCounter::new();
    let client = match &proxy {
        Some(proxy) => {
            proxy
                .client_with(|options| {
                    config.retry.apply_to(options);
                    commands.attach(options);
                })
                .await
        }
        None => direct_client(uri, config.retry, Some(&commands)).await?,
    };
    let server = ServerInfo::detect(&client).await?.describe();
    let db = client.database(&config.database);
    let setup_started = Instant::now();
    db.drop().await?;
    let stores = stores(&db, config, config.retry)?;
    stores.inbox.create_indexes().await?;
    stores.comments.create_indexes().await?;
    let users = Arc::new(config.user_names());
    let discussions = Arc::new(config.discussion_ids());
    let mut ledger = Ledger::default();
    seed_inboxes(config, &stores, &users, &mut ledger).await?;
    let links = seed_discussions(config, &stores, &discussions, &mut ledger).await?;
    let setup = setup_started.elapsed();
    eprintln!(
        "seeded in {:.1} s: {} messages per inbox for {} users, {} discussions of {} comments",
        setup.as_secs_f64(),
        config.seed_messages,
        config.users,
        config.discussions,
        config.seed_comments
    );

    let counters = Arc::new(Counters::default());
    commands.reset();
    let t0 = Instant::now();
    let deadline = t0 + config.duration;
    let progress = tokio::spawn(progress(counters.clone(), t0, config.progress));
    let fault = match (&proxy, config.fault) {
        (Some(proxy), Some(length)) => Some(tokio::spawn(outage(
            proxy.clone(),
            t0,
            config.duration / 2,
            length,
        ))),
        _ => None,
    };
    let mut tasks = Vec::with_capacity(config.clients);
    for id in 0..config.clients {
        let worker = Worker {
            id,
            rng: Rng::new(config.seed ^ (id as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F)),
            own: users
                .iter()
                .enumerate()
                .filter(|(u, _)| u % config.clients == id)
                .map(|(_, name)| name.clone())
                .collect(),
            users: users.clone(),
            discussions: discussions.clone(),
            links: links.as_ref().clone(),
            known: links.iter().map(|l| l.iter().cloned().collect()).collect(),
            pages: HashMap::new(),
            mix: config.mix,
            page: config.page,
            max_recipients: config.max_recipients,
            seq: 0,
            samples: Vec::new(),
            ledger: Ledger::default(),
            examples: HashMap::new(),
        };
        tasks.push(tokio::spawn(worker.run(
            stores.clone(),
            t0,
            deadline,
            counters.clone(),
        )));
    }
    let mut samples = Vec::new();
    let mut examples: HashMap<(Op, &'static str), String> = HashMap::new();
    for task in tasks {
        let (mine, written, seen) = task.await?;
        samples.extend(mine);
        ledger.append(written);
        for (key, message) in seen {
            examples.entry(key).or_insert(message);
        }
    }
    let drained = t0.elapsed();
    progress.abort();
    let commands = commands.snapshot();
    let outage = match (fault, &proxy) {
        (Some(fault), Some(proxy)) => {
            let (start, end, accepted_before) = fault.await?;
            Some(Outage {
                start,
                end,
                accepted_before,
                accepted: proxy.connections_accepted(),
                refused: proxy.connections_refused(),
            })
        }
        _ => None,
    };
    samples.sort_by_key(|s| s.start);
    let mut error_examples: Vec<_> = examples
        .into_iter()
        .map(|((op, kind), message)| (op, kind, message))
        .collect();
    error_examples.sort();
    eprintln!(
        "done: {} operations in {:.1} s ({:.1} s until the last one in flight returned)",
        samples.len(),
        config.duration.as_secs_f64(),
        drained.as_secs_f64()
    );
    Ok(Outcome {
        server,
        samples,
        ledger,
        duration: config.duration,
        drained,
        setup,
        outage,
        error_examples,
        commands,
    })
}

/// A fault proxy in front of the server at `uri`, which must name one host.
async fn start_proxy(uri: &str) -> BoxResult<FaultProxy> {
    let options = ClientOptions::parse(uri).await?;
    let upstream =
        match options.hosts.as_slice() {
            [ServerAddress::Tcp { host, port }] => format!("{host}:{}", port.unwrap_or(27017)),
            _ => return Err(
                "LOAD_FAULT needs a server URI naming a single host (the proxy forwards to one)"
                    .into(),
            ),
        };
    Ok(FaultProxy::start(&upstream)?)
}

/// At `at` into the run, cuts every connection and refuses new ones for `length`; returns the
/// outage's start and end (from the start of the run) and the connections accepted before it.
async fn outage(
    proxy: Arc<FaultProxy>,
    t0: Instant,
    at: Duration,
    length: Duration,
) -> (Duration, Duration, u64) {
    tokio::time::sleep_until((t0 + at).into()).await;
    let accepted = proxy.connections_accepted();
    let start = t0.elapsed();
    proxy.outage(length);
    eprintln!(
        "[{:6.1} s] outage: every connection cut, new ones refused for {:.1} s",
        start.as_secs_f64(),
        length.as_secs_f64()
    );
    tokio::time::sleep(length).await;
    let end = t0.elapsed();
    eprintln!(
        "[{:6.1} s] outage over: {} connections refused so far",
        end.as_secs_f64(),
        proxy.connections_refused()
    );
    (start, end, accepted)
}

/// Every `every`, one line on stderr: operations so far, their rate, errors.
async fn progress(counters: Arc<Counters>, t0: Instant, every: Duration) {
    let mut ticks = tokio::time::interval_at((t0 + every).into(), every);
    let mut last = (0u64, t0);
    loop {
        ticks.tick().await;
        let ops = counters.ops.load(Ordering::Relaxed);
        let errors = counters.errors.load(Ordering::Relaxed);
        let now = Instant::now();
        let window = now.duration_since(last.1).as_secs_f64().max(1e-9);
        eprintln!(
            "[{:6.1} s] {ops} operations, {:.1} ops/s ({:.1} ops/s in the last {:.0} s), {errors} \
             errors",
            now.duration_since(t0).as_secs_f64(),
            ops as f64 / now.duration_since(t0).as_secs_f64().max(1e-9),
            (ops - last.0) as f64 / window,
            window
        );
        last = (ops, now);
    }
}

/// Sends every user `seed_messages` messages: each round, the users in groups of up to 10
/// recipients, each group's message from a user outside it.
async fn seed_inboxes(
    config: &Config,
    stores: &Stores,
    users: &[String],
    ledger: &mut Ledger,
) -> BoxResult<()> {
    let mut rng = Rng::new(config.seed.wrapping_mul(31).wrapping_add(7));
    let mut sends = Vec::new();
    for round in 0..config.seed_messages {
        let order = rng.sample(users, users.len());
        for (group, chunk) in order.chunks(10).enumerate() {
            let mut to = chunk.to_vec();
            let sender = if to.len() == users.len() {
                to.pop().unwrap_or_default()
            } else {
                loop {
                    let candidate = &users[rng.below(users.len())];
                    if !to.contains(candidate) {
                        break candidate.clone();
                    }
                }
            };
            sends.push((format!("s{round}-{group}"), sender, to));
        }
    }
    let done: Vec<SendRecord> = stream::iter(sends)
        .map(|(token, from, to)| async move {
            let message = NewMessage::new(from, to.clone(), text(&token));
            let sent = stores.inbox.send(message).await?;
            Ok::<_, BoxError>(SendRecord {
                token,
                to,
                outcome: Ok((sent.message.id, sent.skipped)),
                seed: true,
            })
        })
        .buffer_unordered(config.clients)
        .try_collect()
        .await?;
    ledger.sends.extend(done);
    Ok(())
}

/// Registers the discussions and posts `seed_comments` comments to each; returns each
/// discussion's links.
async fn seed_discussions(
    config: &Config,
    stores: &Stores,
    discussions: &[String],
    ledger: &mut Ledger,
) -> BoxResult<Arc<Vec<Vec<String>>>> {
    let users = config.user_names();
    let users = &users;
    let seeded: Vec<Vec<PostRecord>> = stream::iter(discussions.iter().enumerate())
        .map(|(d, discussion)| async move {
            stores.comments.create_discussion(discussion).await?;
            let mut posts = Vec::new();
            for i in 0..config.seed_comments {
                let token = format!("sc{d}-{i}");
                let author = &users[(d * 7 + i) % users.len()];
                let comment = NewComment::new(Author::new(author, author), text(&token));
                let posted = stores.comments.post(discussion, comment).await?;
                posts.push(PostRecord {
                    discussion: discussion.clone(),
                    token,
                    outcome: Ok(posted.link),
                    seed: true,
                });
            }
            Ok::<_, BoxError>(posts)
        })
        .buffered(config.clients)
        .try_collect()
        .await?;
    let links = seeded
        .iter()
        .map(|posts| {
            posts
                .iter()
                .filter_map(|p| p.outcome.as_ref().ok().cloned())
                .collect()
        })
        .collect();
    ledger.posts.extend(seeded.into_iter().flatten());
    Ok(Arc::new(links))
}

/// The last page a user read: its message ids and its cursor.
struct Seen {
    ids: Vec<MessageId>,
    next: Option<Cursor>,
}

/// One client: a task acting, one call at a time, for its own share of the users.
struct Worker {
    id: usize,
    rng: Rng,
    /// The users this client acts for (every user belongs to one client, so each user's
    /// writes, votes included, are made one after another).
    own: Vec<String>,
    users: Arc<Vec<String>>,
    discussions: Arc<Vec<String>>,
    /// Each discussion's links, as seeded and as this client learned them since, with the same
    /// ones as a set.
    links: Vec<Vec<String>>,
    known: Vec<HashSet<String>>,
    pages: HashMap<String, Seen>,
    mix: Mix,
    page: usize,
    max_recipients: usize,
    seq: u64,
    samples: Vec<Sample>,
    ledger: Ledger,
    examples: HashMap<(Op, &'static str), String>,
}

type WorkerResult = (Vec<Sample>, Ledger, HashMap<(Op, &'static str), String>);

/// Runs `call`, timing it from the call to its result.
async fn timed<T>(
    call: impl Future<Output = mongo_social::Result<T>>,
) -> (Instant, Duration, mongo_social::Result<T>) {
    let started = Instant::now();
    let result = call.await;
    (started, started.elapsed(), result)
}

impl Worker {
    async fn run(
        mut self,
        stores: Stores,
        t0: Instant,
        deadline: Instant,
        counters: Arc<Counters>,
    ) -> WorkerResult {
        // One of every operation first (finished even past the deadline, on a server too slow
        // to make nine calls in the time), then by the mix.
        let mut first_round = Op::ALL.into_iter().peekable();
        while first_round.peek().is_some() || Instant::now() < deadline {
            let has_next = self.pages.values().any(|s| s.next.is_some());
            let wanted = match first_round.next() {
                Some(op) => op,
                None => self.mix.pick(&mut self.rng, has_next),
            };
            let user = self.user_for(wanted);
            let sample = self.step(wanted, &user, &stores, t0).await;
            counters.ops.fetch_add(1, Ordering::Relaxed);
            if sample.error.is_some() {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
            self.samples.push(sample);
        }
        (self.samples, self.ledger, self.examples)
    }

    /// One of the client's users, at random: for a next page or a mark, one who has read a
    /// page that allows it, if any has.
    fn user_for(&mut self, op: Op) -> String {
        let able: Vec<&String> = match op {
            Op::NextPage => self
                .own
                .iter()
                .filter(|u| self.pages.get(*u).is_some_and(|s| s.next.is_some()))
                .collect(),
            Op::MarkRead | Op::MarkUpTo => self
                .own
                .iter()
                .filter(|u| self.pages.get(*u).is_some_and(|s| !s.ids.is_empty()))
                .collect(),
            _ => Vec::new(),
        };
        if able.is_empty() {
            self.own[self.rng.below(self.own.len())].clone()
        } else {
            able[self.rng.below(able.len())].clone()
        }
    }

    fn note_error(&mut self, op: Op, error: &mongo_social::Error) -> &'static str {
        let kind = error.kind();
        self.examples
            .entry((op, kind))
            .or_insert_with(|| error.to_string());
        kind
    }

    /// Makes one call of `wanted` (or, when it needs what the user has not read yet, of the
    /// read that gives it) for `user`.
    async fn step(&mut self, wanted: Op, user: &str, stores: &Stores, t0: Instant) -> Sample {
        let seen = self.pages.get(user);
        // A message of the last page the user read, and that page's cursor, for a mark.
        let target = seen
            .filter(|s| !s.ids.is_empty())
            .map(|s| (s.ids[self.rng.below(s.ids.len())], s.next.clone()));
        let op = match wanted {
            Op::NextPage if seen.is_none_or(|s| s.next.is_none()) => Op::Page,
            Op::MarkRead | Op::MarkUpTo if target.is_none() => Op::Page,
            Op::Vote if self.links.iter().all(Vec::is_empty) => Op::Post,
            op => op,
        };
        let mut size = 0;
        let (started, latency, error) = match op {
            Op::Page | Op::NextPage => {
                let request = match self.pages.get(user).and_then(|s| s.next.clone()) {
                    Some(cursor) if op == Op::NextPage => PageRequest::after(self.page, cursor),
                    _ => PageRequest::first(self.page),
                };
                let (started, latency, result) =
                    timed(stores.inbox.inbox_page(user, request)).await;
                let error = match result {
                    Ok(page) => {
                        size = page.items.len();
                        let ids: Vec<MessageId> = page.items.iter().map(|m| m.id).collect();
                        if ids.is_empty() {
                            self.pages.remove(user);
                        } else {
                            self.pages.insert(
                                user.to_owned(),
                                Seen {
                                    ids,
                                    next: page.next,
                                },
                            );
                        }
                        None
                    }
                    Err(e) => Some(self.note_error(op, &e)),
                };
                (started, latency, error)
            }
            Op::Unread => {
                let (started, latency, result) = timed(stores.inbox.unread_count(user)).await;
                let error = result.err().map(|e| self.note_error(op, &e));
                (started, latency, error)
            }
            Op::Send => {
                let others: Vec<String> =
                    self.users.iter().filter(|u| *u != user).cloned().collect();
                let k = self.rng.log_uniform(self.max_recipients.min(others.len()));
                let to = self.rng.sample(&others, k);
                size = to.len();
                self.seq += 1;
                let token = format!("m{}-{}", self.id, self.seq);
                let message = NewMessage::new(user, to.clone(), text(&token));
                let (started, latency, result) = timed(stores.inbox.send(message)).await;
                let (outcome, error) = match result {
                    Ok(sent) => (Ok((sent.message.id, sent.skipped)), None),
                    Err(e) => {
                        let kind = self.note_error(op, &e);
                        (Err(kind), Some(kind))
                    }
                };
                self.ledger.sends.push(SendRecord {
                    token,
                    to,
                    outcome,
                    seed: false,
                });
                (started, latency, error)
            }
            Op::MarkRead | Op::MarkUpTo => {
                let Some((id, cursor)) = target else {
                    // Not reached: a mark without a page read falls back to the read above.
                    return self.skipped(op, t0);
                };
                let (started, latency, result) = if op == Op::MarkRead {
                    timed(stores.inbox.mark_read(user, id)).await
                } else {
                    let up_to = match cursor {
                        Some(cursor) if self.rng.chance(0.5) => UpTo::Cursor(cursor),
                        _ => UpTo::Message(id),
                    };
                    timed(stores.inbox.mark_read_up_to(user, up_to)).await
                };
                let error = result.err().map(|e| self.note_error(op, &e));
                (started, latency, error)
            }
            Op::Post => {
                let d = self.rng.below(self.discussions.len());
                let discussion = self.discussions[d].clone();
                self.seq += 1;
                let token = format!("c{}-{}", self.id, self.seq);
                let comment = NewComment::new(Author::new(user, user), text(&token));
                let (started, latency, result) =
                    timed(stores.comments.post(&discussion, comment)).await;
                let (outcome, error) = match result {
                    Ok(comment) => {
                        self.learn(d, &comment.link);
                        (Ok(comment.link), None)
                    }
                    Err(e) => {
                        let kind = self.note_error(op, &e);
                        (Err(kind), Some(kind))
                    }
                };
                self.ledger.posts.push(PostRecord {
                    discussion,
                    token,
                    outcome,
                    seed: false,
                });
                (started, latency, error)
            }
            Op::Comments => {
                let d = self.rng.below(self.discussions.len());
                let order = if self.rng.chance(0.5) {
                    Order::OldestFirst
                } else {
                    Order::NewestFirst
                };
                let (started, latency, result) = timed(stores.comments.chronological(
                    &self.discussions[d],
                    order,
                    PageRequest::first(self.page),
                ))
                .await;
                let error = match result {
                    Ok(page) => {
                        size = page.items.len();
                        for comment in &page.items {
                            self.learn(d, &comment.link);
                        }
                        None
                    }
                    Err(e) => Some(self.note_error(op, &e)),
                };
                (started, latency, error)
            }
            Op::Vote => {
                let with_links: Vec<usize> = (0..self.links.len())
                    .filter(|&d| !self.links[d].is_empty())
                    .collect();
                let d = with_links[self.rng.below(with_links.len())];
                let discussion = self.discussions[d].clone();
                let link = self.links[d][self.rng.below(self.links[d].len())].clone();
                let vote = if self.rng.chance(0.15) {
                    None
                } else if self.rng.chance(0.5) {
                    Some(Vote::Up)
                } else {
                    Some(Vote::Down)
                };
                let (started, latency, result) = match vote {
                    Some(vote) => timed(stores.comments.vote(&discussion, &link, user, vote)).await,
                    None => timed(stores.comments.retract_vote(&discussion, &link, user)).await,
                };
                let (outcome, error) = match result {
                    Ok(previous) => (Ok(previous), None),
                    Err(e) => {
                        let kind = self.note_error(op, &e);
                        (Err(kind), Some(kind))
                    }
                };
                self.ledger.votes.push(VoteRecord {
                    discussion,
                    link,
                    user: user.to_owned(),
                    vote,
                    outcome,
                });
                (started, latency, error)
            }
        };
        Sample {
            op,
            start: started.duration_since(t0),
            latency,
            error,
            size,
        }
    }

    /// Remembers a link of discussion `d`, for votes.
    fn learn(&mut self, d: usize, link: &str) {
        if self.known[d].insert(link.to_owned()) {
            self.links[d].push(link.to_owned());
        }
    }

    /// A call not made (never, see [`Worker::step`]), recorded as a failure so it would show.
    fn skipped(&self, op: Op, t0: Instant) -> Sample {
        Sample {
            op,
            start: t0.elapsed(),
            latency: Duration::ZERO,
            error: Some("not_made"),
            size: 0,
        }
    }
}
