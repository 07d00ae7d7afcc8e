//! The `tracing` feature against the real server: each operation's span with its fields (the
//! command count equal to what [`CommandCounter`] saw), an error's kind as the outcome, a retry
//! after the fault proxy drops a reply with its connection, a job run (and re-run) by a
//! worker, followed by its id, the comment stores' spans, and a migration's step.
//!
//! Each test runs on a current-thread runtime with its own capturing subscriber as the thread's
//! default, so the spans of a worker spawned by the test are captured too, and tests running
//! side by side do not see each other's.

use mongo_social_lab::SetUp;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bson::doc;
use mongo_social::comments::{
    Author, CommentStore, DynCommentStore, Embedded, HybridPages, NewComment, Order, PerComment,
};
use mongo_social::delivery::Delivery;
use mongo_social::graph::FollowGraph;
use mongo_social::inbox::DynInboxTransfer;
use mongo_social::jobs::{Job, JobHandler, JobQueue};
use mongo_social::migrate::InboxMigration;
use mongo_social::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, InboxStore, NewMessage, PageRequest,
};
use mongo_social_lab::{self as testing, CommandCounter};
use mongodb::{Client, Database};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

// --- A capturing subscriber -----------------------------------------------------------------

/// A span as it was created, with the fields recorded on it since.
#[derive(Clone, Debug)]
struct SpanRecord {
    name: &'static str,
    /// The index of its parent span in [`Captured::spans`].
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
}

/// An event, with the span it happened in.
#[derive(Clone, Debug)]
struct EventRecord {
    level: Level,
    /// The index of the span it happened in, in [`Captured::spans`].
    span: Option<usize>,
    fields: BTreeMap<String, String>,
}

impl EventRecord {
    fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
}

#[derive(Debug, Default)]
struct Captured {
    spans: Vec<SpanRecord>,
    events: Vec<EventRecord>,
}

/// A layer keeping every span and event it sees; clones share the record.
#[derive(Clone, Debug, Default)]
struct Capture(Arc<Mutex<Captured>>);

/// Each field as text: strings as they are, numbers and booleans printed, others by `Debug`
/// (which is `Display` for `%` fields).
struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

/// The index in [`Captured::spans`] of a span, kept in its extensions.
struct Index(usize);

impl<S> Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span
            .parent()
            .and_then(|parent| parent.extensions().get::<Index>().map(|index| index.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut record = self.lock();
        record.spans.push(SpanRecord {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
        span.extensions_mut().insert(Index(record.spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let Some(index) = span.extensions().get::<Index>().map(|index| index.0) else {
            return;
        };
        values.record(&mut Fields(&mut self.lock().spans[index].fields));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let span = ctx
            .event_span(event)
            .and_then(|span| span.extensions().get::<Index>().map(|index| index.0));
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.lock().events.push(EventRecord {
            level: *event.metadata().level(),
            span,
            fields,
        });
    }
}

impl Capture {
    fn lock(&self) -> std::sync::MutexGuard<'_, Captured> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Installs a new capture as this thread's subscriber, until the guard is dropped.
    fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let capture = Self::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        (capture, tracing::subscriber::set_default(subscriber))
    }

    /// Forgets everything captured so far.
    fn clear(&self) {
        let mut record = self.lock();
        record.spans.clear();
        record.events.clear();
    }

    /// The spans named `name`, with their indexes.
    fn spans(&self, name: &str) -> Vec<(usize, SpanRecord)> {
        self.lock()
            .spans
            .iter()
            .enumerate()
            .filter(|(_, span)| span.name == name)
            .map(|(index, span)| (index, span.clone()))
            .collect()
    }

    /// The one span named `name`.
    fn only_span(&self, name: &str) -> (usize, SpanRecord) {
        let mut spans = self.spans(name);
        assert_eq!(spans.len(), 1, "one `{name}` span: {:#?}", self.lock());
        spans.remove(0)
    }

    /// The events whose message is `message`.
    fn events(&self, message: &str) -> Vec<EventRecord> {
        self.lock()
            .events
            .iter()
            .filter(|event| event.message() == message)
            .cloned()
            .collect()
    }

    /// Whether span `index` is `ancestor` or inside it.
    fn within(&self, index: Option<usize>, ancestor: usize) -> bool {
        let record = self.lock();
        let mut at = index;
        while let Some(index) = at {
            if index == ancestor {
                return true;
            }
            at = record.spans[index].parent;
        }
        false
    }

    /// Every field of every span and event, for the check that no user id is recorded.
    fn all_values(&self) -> Vec<String> {
        let record = self.lock();
        let spans = record.spans.iter().flat_map(|span| span.fields.values());
        let events = record.events.iter().flat_map(|event| event.fields.values());
        spans.chain(events).cloned().collect()
    }
}

/// The field `name` of a span or event, which must be there.
fn field<'a>(fields: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    fields
        .get(name)
        .unwrap_or_else(|| panic!("no field `{name}` in {fields:?}"))
}

// --- Fixtures --------------------------------------------------------------------------------

/// A client of the test server that counts commands both ways: with a [`CommandCounter`] and
/// with the operations' own count ([`mongo_social::observe::attach`], attached last).
async fn counted_client(counter: &CommandCounter) -> Client {
    testing::client_with(|options| {
        counter.attach(options);
        mongo_social::observe::attach(options);
    })
    .await
}

/// The database for `test`, dropped first.
async fn fresh_db(client: &Client, test: &str) -> Database {
    let db = client.database(&testing::database_name(test));
    db.drop().await.expect("drop the test database");
    db
}

type Inbox = Arc<DynInboxStore<String>>;

fn inboxes(db: &Database) -> [(&'static str, Inbox); 3] {
    [
        ("fan-out-on-read", Arc::new(FanOutOnRead::new(db))),
        ("fan-out-on-write", Arc::new(FanOutOnWrite::new(db))),
        ("bucketed-fan-out", Arc::new(BucketedFanOut::new(db))),
    ]
}

// --- Operations ------------------------------------------------------------------------------

/// A send and a page read, with every strategy: one span each, named by store and operation,
/// with the strategy, the number of recipients (or the page's limit), the commands the
/// `CommandCounter` saw and the outcome; nothing at `info` or above but the server's missing
/// capabilities (once, at detection); no user id or payload recorded anywhere.
#[tokio::test]
async fn a_send_and_a_page_read_are_spans_with_their_commands_and_outcome() {
    let (capture, _guard) = Capture::install();
    let counter = CommandCounter::new();
    let client = counted_client(&counter).await;
    let db = fresh_db(&client, "tracing_send_and_page").await;
    let missing = testing::server_info().await.capabilities().missing();

    for (strategy, inbox) in inboxes(&db) {
        capture.clear();
        inbox.set_up().await.expect("indexes");
        if strategy == "fan-out-on-read" {
            // Detection ran in the first operation of the first store: the capabilities the
            // server lacks are reported once, at `info`, inside that operation's span.
            let (created, _) = capture.only_span("inbox.create_indexes");
            let reported =
                capture.events("the server lacks capabilities: their fallback paths are used");
            if missing.is_empty() {
                assert!(reported.is_empty(), "{reported:?}");
            } else {
                assert_eq!(reported.len(), 1, "{reported:?}");
                assert_eq!(reported[0].level, Level::INFO);
                assert_eq!(field(&reported[0].fields, "missing"), missing.join(", "));
                assert!(capture.within(reported[0].span, created));
            }
        }

        capture.clear();
        let message = NewMessage::new(
            "sender-x1",
            ["rcpt-a1", "rcpt-b2", "rcpt-c3"],
            "hi-7".to_string(),
        );
        let (sent, commands) = counter.measure(inbox.send(message)).await;
        sent.expect("send");
        let (_, send) = capture.only_span("inbox.send");
        assert_eq!(field(&send.fields, "strategy"), strategy);
        assert_eq!(field(&send.fields, "recipients"), "3");
        assert_eq!(field(&send.fields, "outcome"), "ok");
        assert!(!commands.is_empty(), "{strategy}: a send sends commands");
        assert_eq!(
            field(&send.fields, "commands"),
            commands.len().to_string(),
            "{strategy}: {commands:?}"
        );

        capture.clear();
        let (page, commands) = counter
            .measure(inbox.inbox_page("rcpt-b2", PageRequest::first(10)))
            .await;
        assert_eq!(page.expect("page").items.len(), 1, "{strategy}");
        let (_, read) = capture.only_span("inbox.page");
        assert_eq!(field(&read.fields, "strategy"), strategy);
        assert_eq!(field(&read.fields, "limit"), "10");
        assert_eq!(field(&read.fields, "outcome"), "ok");
        assert_eq!(
            field(&read.fields, "commands"),
            commands.len().to_string(),
            "{strategy}: {commands:?}"
        );
        let loud: Vec<_> = capture
            .lock()
            .events
            .iter()
            .filter(|event| event.level <= Level::INFO)
            .cloned()
            .collect();
        assert!(
            loud.is_empty(),
            "{strategy}: the happy path is quiet: {loud:?}"
        );
        let values = capture.all_values();
        for secret in ["sender-x1", "rcpt-a1", "rcpt-b2", "rcpt-c3", "hi-7"] {
            assert!(
                !values.iter().any(|value| value.contains(secret)),
                "{strategy}: `{secret}` recorded: {values:?}"
            );
        }
    }
}

/// A refused input: the span's outcome is the error's kind, and no command was sent.
#[tokio::test]
async fn a_refused_input_is_the_outcome_of_its_span() {
    let (capture, _guard) = Capture::install();
    let counter = CommandCounter::new();
    let client = counted_client(&counter).await;
    let db = fresh_db(&client, "tracing_refused").await;
    let inbox: FanOutOnRead<String> = FanOutOnRead::new(&db);
    let no_one: [&str; 0] = [];
    let (sent, commands) = counter
        .measure(inbox.send(NewMessage::new("joe", no_one, "hi".to_string())))
        .await;
    let error = sent.expect_err("a message to no one is refused");
    assert!(error.is_invalid_input(), "{error}");
    assert!(commands.is_empty(), "{commands:?}");
    let (_, send) = capture.only_span("inbox.send");
    assert_eq!(field(&send.fields, "outcome"), "invalid_input");
    assert_eq!(field(&send.fields, "recipients"), "0");
    assert_eq!(field(&send.fields, "commands"), "0");
}

// --- Retries ---------------------------------------------------------------------------------

/// A send whose reply the fault proxy drops with its connection is retried: an `info` event
/// inside the send's span says which attempt failed, how, and the delay chosen (from the
/// default policy's first backoff, 10 ms jittered to between 5 and 10 ms); the send succeeds,
/// and its span counts every attempt's commands, as the `CommandCounter` does.
#[tokio::test]
async fn a_retry_after_a_lost_connection_is_an_event_of_the_operation() {
    let (capture, _guard) = Capture::install();
    let db_name = testing::database_name("tracing_retry");
    testing::client()
        .await
        .database(&db_name)
        .drop()
        .await
        .expect("drop the test database");
    let proxy = testing::fault_proxy();
    let counter = CommandCounter::new();
    let client = proxy
        .client_with(|options| {
            // The driver's own retry (once, after a new server selection) would hide the
            // failure from the library's.
            options.retry_reads = Some(false);
            options.retry_writes = Some(false);
            counter.attach(options);
            mongo_social::observe::attach(options);
        })
        .await;
    let inbox: FanOutOnRead<String> = FanOutOnRead::new(&client.database(&db_name));
    inbox
        .count("bob")
        .await
        .expect("connected, capabilities known");

    capture.clear();
    proxy.lose_replies_for(Duration::from_millis(400));
    let (sent, commands) = counter
        .measure(inbox.send(NewMessage::new("joe", ["bob"], "hi".to_string())))
        .await;
    sent.expect("the send is retried until it succeeds");
    assert!(proxy.replies_lost() > 0, "a reply was lost");

    let (send_index, send) = capture.only_span("inbox.send");
    assert_eq!(field(&send.fields, "outcome"), "ok");
    assert_eq!(
        field(&send.fields, "commands"),
        commands.len().to_string(),
        "{commands:?}"
    );
    let retries = capture.events("retrying after a transient failure");
    assert!(!retries.is_empty(), "a retry: {:#?}", capture.lock().events);
    let first = &retries[0];
    assert_eq!(first.level, Level::INFO);
    assert!(capture.within(first.span, send_index), "{first:?}");
    assert_eq!(field(&first.fields, "attempt"), "1");
    assert_eq!(field(&first.fields, "error"), "unreachable");
    let delay: u64 = field(&first.fields, "delay_ms").parse().expect("a number");
    assert!((5..=10).contains(&delay), "{delay} ms");
    assert!(!field(&first.fields, "operation").is_empty());
    // Each retried step (the filters' read, the insert) counts its own attempts from 1.
    let mut attempts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for retry in &retries {
        assert!(capture.within(retry.span, send_index), "{retry:?}");
        attempts
            .entry(field(&retry.fields, "operation").to_owned())
            .or_default()
            .push(field(&retry.fields, "attempt").to_owned());
    }
    for (operation, attempts) in attempts {
        let expected: Vec<String> = (1..=attempts.len()).map(|n| n.to_string()).collect();
        assert_eq!(attempts, expected, "{operation}");
    }
}

// --- Jobs ------------------------------------------------------------------------------------

/// Fails each job's first run, succeeds after.
#[derive(Debug, Default)]
struct FailsOnce(AtomicUsize);

#[async_trait]
impl JobHandler for FailsOnce {
    async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        if job.attempts == 0 {
            return Err(job.error("the first run fails"));
        }
        Ok(())
    }
}

/// A job run by a worker: claimed, failed once (a `warn` event), run again and finished, each
/// run a `jobs.run` span carrying the job's id, its kind, the attempt and the worker's number,
/// with the job's events inside it.
#[tokio::test]
async fn a_job_is_followed_by_its_id_across_runs_of_a_worker() {
    let (capture, _guard) = Capture::install();
    let counter = CommandCounter::new();
    let client = counted_client(&counter).await;
    let db = fresh_db(&client, "tracing_job").await;
    let queue = JobQueue::builder(&db)
        .poll_interval(Duration::from_millis(20))
        .max_poll_interval(Duration::from_millis(100))
        .retry_delay(Duration::from_millis(50))
        .build()
        .expect("queue");
    queue.set_up().await.expect("indexes");
    let id = queue
        .enqueue("test-kind", doc! { "n": 1 })
        .await
        .expect("enqueue");
    let (_, enqueued) = capture.only_span("jobs.enqueue");
    assert_eq!(field(&enqueued.fields, "kind"), "test-kind");
    assert_eq!(field(&enqueued.fields, "outcome"), "ok");

    capture.clear();
    let handler = Arc::new(FailsOnce::default());
    let worker = queue.start_worker(handler.clone());
    queue
        .wait_until_drained(Duration::from_secs(60))
        .await
        .expect("the job runs twice and leaves the queue");
    worker.stop().await;
    assert_eq!(handler.0.load(Ordering::SeqCst), 2);

    let hex = id.to_hex();
    let runs = capture.spans("jobs.run");
    assert_eq!(runs.len(), 2, "{runs:#?}");
    for (attempt, (_, run)) in runs.iter().enumerate() {
        assert_eq!(field(&run.fields, "job"), hex);
        assert_eq!(field(&run.fields, "kind"), "test-kind");
        assert_eq!(field(&run.fields, "attempt"), (attempt + 1).to_string());
        assert_eq!(field(&run.fields, "worker"), runs[0].1.fields["worker"]);
    }
    assert_eq!(field(&runs[0].1.fields, "outcome"), "handler");
    assert_eq!(field(&runs[1].1.fields, "outcome"), "ok");

    let claimed = capture.events("jobs claimed");
    assert_eq!(claimed.len(), 2, "claimed once per run: {claimed:?}");
    for event in &claimed {
        assert_eq!(field(&event.fields, "jobs"), hex);
        assert_eq!(event.level, Level::DEBUG);
    }
    let failed = capture.events("job failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].level, Level::WARN);
    assert!(capture.within(failed[0].span, runs[0].0));
    assert_eq!(field(&failed[0].fields, "job"), hex);
    assert_eq!(field(&failed[0].fields, "attempt"), "1");
    assert_eq!(field(&failed[0].fields, "error"), "handler");
    assert_eq!(field(&failed[0].fields, "given_up"), "false");
    let finished = capture.events("job finished");
    assert_eq!(finished.len(), 1, "{finished:?}");
    assert!(capture.within(finished[0].span, runs[1].0));
    assert_eq!(field(&finished[0].fields, "job"), hex);
}

// --- Nested operations ------------------------------------------------------------------------

/// A post delivered by the delivery's jobs: `delivery.run_pending` counts every command of the
/// operations it runs (each job, the graph's reads and the inbox's writes: spans inside its own),
/// as the `CommandCounter` does; each page's progress event names the post, so the whole
/// delivery can be followed across its jobs.
#[tokio::test]
async fn a_delivery_counts_the_commands_of_the_operations_it_runs() {
    let (capture, _guard) = Capture::install();
    let counter = CommandCounter::new();
    let client = counted_client(&counter).await;
    let db = fresh_db(&client, "tracing_delivery").await;
    let graph = Arc::new(FollowGraph::new(&db));
    graph.set_up().await.expect("graph indexes");
    let inbox: Inbox = Arc::new(FanOutOnWrite::new(&db));
    for user in ["author", "fan-1", "fan-2", "fan-3"] {
        graph.add_user(user).await.expect("user");
    }
    let delivery = Delivery::builder(&db, graph, inbox)
        .batch(2)
        .build()
        .expect("delivery");
    delivery.set_up().await.expect("indexes");
    for fan in ["fan-1", "fan-2", "fan-3"] {
        delivery.follow(fan, "author").await.expect("follow");
        delivery.touch(fan).await.expect("active");
    }
    let post = delivery
        .post("author", "news".to_string())
        .await
        .expect("post");

    capture.clear();
    let (ran, commands) = counter.measure(delivery.run_pending()).await;
    assert!(ran.expect("the fan-out runs") >= 2);
    let (run_index, run) = capture.only_span("delivery.run_pending");
    assert_eq!(field(&run.fields, "outcome"), "ok");
    assert_eq!(
        field(&run.fields, "commands"),
        commands.len().to_string(),
        "{commands:?}"
    );
    let jobs = capture.spans("jobs.run");
    assert!(jobs.len() >= 2, "{jobs:#?}");
    let delivered = capture.spans("inbox.deliver");
    assert!(!delivered.is_empty());
    for (index, span) in jobs.iter().chain(&delivered) {
        assert!(capture.within(Some(*index), run_index), "{span:?}");
        assert_eq!(field(&span.fields, "outcome"), "ok");
    }
    let pages = capture.events("delivery page fanned out");
    assert_eq!(pages.len(), 2, "3 followers in pages of 2: {pages:?}");
    let mut followers = 0;
    for page in &pages {
        assert_eq!(field(&page.fields, "post"), post.id.to_string());
        followers += field(&page.fields, "followers")
            .parse::<usize>()
            .expect("a number");
    }
    assert_eq!(followers, 3);
    assert_eq!(field(&pages[0].fields, "first_page"), "true");
    assert_eq!(field(&pages[1].fields, "last_page"), "true");
}

// --- Comments --------------------------------------------------------------------------------

type Comments = Arc<DynCommentStore>;

fn comment_stores(db: &Database) -> [(&'static str, Comments); 3] {
    [
        ("per-comment", Arc::new(PerComment::new(db))),
        ("embedded", Arc::new(Embedded::new(db))),
        ("hybrid-pages", Arc::new(HybridPages::new(db))),
    ]
}

/// A comment posted and a page read, with every comment strategy: one span each, named
/// `comments.<operation>`, with the strategy, the page's limit, the commands the
/// `CommandCounter` saw and the outcome; no discussion id, user id, text or link recorded.
#[tokio::test]
async fn a_comment_post_and_a_page_read_are_spans_with_their_commands_and_outcome() {
    let (capture, _guard) = Capture::install();
    let counter = CommandCounter::new();
    let client = counted_client(&counter).await;
    let db = fresh_db(&client, "tracing_comments").await;

    for (strategy, store) in comment_stores(&db) {
        assert_eq!(store.strategy().name(), strategy);
        store.set_up().await.expect("indexes");
        store
            .create_discussion("disc-q9")
            .await
            .expect("discussion");

        capture.clear();
        let comment = NewComment::new(Author::new("author-z4", "Zedaro"), "text-k8");
        let (posted, commands) = counter.measure(store.post("disc-q9", comment)).await;
        let posted = posted.expect("post");
        let (_, post) = capture.only_span("comments.post");
        assert_eq!(field(&post.fields, "strategy"), strategy);
        assert_eq!(field(&post.fields, "outcome"), "ok");
        assert!(!commands.is_empty(), "{strategy}: a post sends commands");
        assert_eq!(
            field(&post.fields, "commands"),
            commands.len().to_string(),
            "{strategy}: {commands:?}"
        );

        capture.clear();
        let (page, commands) = counter
            .measure(store.chronological("disc-q9", Order::OldestFirst, PageRequest::first(10)))
            .await;
        let page = page.expect("page");
        assert_eq!(page.items.len(), 1, "{strategy}");
        assert_eq!(page.items[0].link, posted.link, "{strategy}");
        let (_, read) = capture.only_span("comments.chronological");
        assert_eq!(field(&read.fields, "strategy"), strategy);
        assert_eq!(field(&read.fields, "limit"), "10");
        assert_eq!(field(&read.fields, "outcome"), "ok");
        assert_eq!(
            field(&read.fields, "commands"),
            commands.len().to_string(),
            "{strategy}: {commands:?}"
        );

        let values = capture.all_values();
        // An embedded comment's link is its path (`0`), too short to look for.
        let link = Some(posted.link.as_str()).filter(|link| link.len() >= 4);
        for secret in ["disc-q9", "author-z4", "Zedaro", "text-k8"]
            .into_iter()
            .chain(link)
        {
            assert!(
                !values.iter().any(|value| value.contains(secret)),
                "{strategy}: `{secret}` recorded: {values:?}"
            );
        }
    }
}

/// A refused comment: the span's outcome is the error's kind, and no command was sent.
#[tokio::test]
async fn a_refused_comment_is_the_outcome_of_its_span() {
    let (capture, _guard) = Capture::install();
    let counter = CommandCounter::new();
    let client = counted_client(&counter).await;
    let db = fresh_db(&client, "tracing_refused_comment").await;
    let store = PerComment::new(&db);
    let blank = NewComment::new(Author::new("u1", "Rick"), "   ");
    let (posted, commands) = counter.measure(store.post("d1", blank)).await;
    let error = posted.expect_err("a blank comment is refused");
    assert!(error.is_invalid_input(), "{error}");
    assert!(commands.is_empty(), "{commands:?}");
    let (_, post) = capture.only_span("comments.post");
    assert_eq!(field(&post.fields, "strategy"), "per-comment");
    assert_eq!(field(&post.fields, "outcome"), "invalid_input");
    assert_eq!(field(&post.fields, "commands"), "0");
}

// --- Migrations ------------------------------------------------------------------------------

/// An inbox migration started and its copy run: `migrate.start` and `migrate.run_pending`
/// spans of migration `inbox`, one `migrate.copy` span per owner inside the run (the items it
/// copied adding up to what the progress says), each holding the target's `inbox.import`; then
/// a send to the migrating store, a `migrate.inbox.send` span holding the source's
/// `inbox.send` span and counting the target's write too.
#[tokio::test]
async fn a_migration_step_is_spans_with_the_items_copied() {
    let (capture, _guard) = Capture::install();
    let counter = CommandCounter::new();
    let client = counted_client(&counter).await;
    let db = fresh_db(&client, "tracing_migrate").await;
    let source: Arc<DynInboxTransfer<String>> = Arc::new(
        FanOutOnRead::<String>::builder(&db)
            .collection_prefix("src_")
            .build()
            .expect("source"),
    );
    let target: Arc<DynInboxTransfer<String>> = Arc::new(
        FanOutOnWrite::<String>::builder(&db)
            .collection_prefix("dst_")
            .build()
            .expect("target"),
    );
    source.set_up().await.expect("indexes");
    for to in [vec!["rcpt-a1", "rcpt-b2"], vec!["rcpt-b2"]] {
        source
            .send(NewMessage::new("sender-x1", to, "hi-7".to_string()))
            .await
            .expect("send");
    }
    let migration = InboxMigration::builder(&db, "trace", source, target)
        .build()
        .expect("migration");

    capture.clear();
    migration.start().await.expect("start");
    let (_, start) = capture.only_span("migrate.start");
    assert_eq!(field(&start.fields, "migration"), "inbox");
    assert_eq!(field(&start.fields, "outcome"), "ok");

    capture.clear();
    let (ran, commands) = counter.measure(migration.run_pending()).await;
    assert!(ran.expect("the copy runs") >= 2, "a listing and copies");
    let (run_index, run) = capture.only_span("migrate.run_pending");
    assert_eq!(field(&run.fields, "migration"), "inbox");
    assert_eq!(field(&run.fields, "outcome"), "ok");
    assert_eq!(
        field(&run.fields, "commands"),
        commands.len().to_string(),
        "{commands:?}"
    );
    let copies = capture.spans("migrate.copy");
    assert!(!copies.is_empty(), "{:#?}", capture.lock().spans);
    let mut items = 0;
    for (index, copy) in &copies {
        assert!(capture.within(Some(*index), run_index), "{copy:?}");
        assert_eq!(field(&copy.fields, "migration"), "inbox");
        assert_eq!(field(&copy.fields, "outcome"), "ok");
        items += field(&copy.fields, "items")
            .parse::<u64>()
            .expect("a number");
    }
    let imports = capture.spans("inbox.import");
    assert!(!imports.is_empty());
    for (index, import) in &imports {
        assert!(
            copies
                .iter()
                .any(|(copy, _)| capture.within(Some(*index), *copy)),
            "{import:?}"
        );
        assert_eq!(field(&import.fields, "strategy"), "fan-out-on-write");
    }
    assert!(migration.is_copied().await.expect("copied"));
    let progress = migration.progress().await.expect("progress");
    assert!(progress.messages_copied > 0, "{progress:?}");
    assert_eq!(items, progress.messages_copied);

    capture.clear();
    let store = migration.store();
    let (sent, commands) = counter
        .measure(store.send(NewMessage::new(
            "sender-x1",
            ["rcpt-a1"],
            "hi-8".to_string(),
        )))
        .await;
    sent.expect("send");
    let (send_index, send) = capture.only_span("migrate.inbox.send");
    assert_eq!(field(&send.fields, "recipients"), "1");
    assert_eq!(field(&send.fields, "outcome"), "ok");
    assert_eq!(
        field(&send.fields, "commands"),
        commands.len().to_string(),
        "{commands:?}"
    );
    let (source_send, _) = capture.only_span("inbox.send");
    assert!(capture.within(Some(source_send), send_index));

    let values = capture.all_values();
    for secret in ["sender-x1", "rcpt-a1", "rcpt-b2", "hi-7", "hi-8"] {
        assert!(
            !values.iter().any(|value| value.contains(secret)),
            "`{secret}` recorded: {values:?}"
        );
    }
}
