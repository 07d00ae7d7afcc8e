//! Job queue workers against the real server: what an idle worker costs, what dropping its
//! handle does, and the delivery's and the feed's workers, which run on the same queue. Costs
//! are counted in commands, never timed.

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bson::doc;
use mongo_social::delivery::Delivery;
use mongo_social::feed::FeedStore;
use mongo_social::graph::FollowGraph;
use mongo_social::jobs::{Job, JobHandler, JobQueue};
use mongo_social::FanOutOnWrite;
use mongo_social_lab::{self as testing, TestDb};

/// Counts the jobs it runs.
#[derive(Debug, Default)]
struct Counting(AtomicUsize);

#[async_trait]
impl JobHandler for Counting {
    async fn handle(&self, _job: &Job) -> mongo_social::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

const FIRST: Duration = Duration::from_millis(50);
const MAX: Duration = Duration::from_secs(1);

/// How many times an idle worker looks for jobs within `window`, by the documented schedule: once
/// at start, then after waits of `first`, doubling up to `max`; one more for timer slack.
fn idle_polls_within(window: Duration, first: Duration, max: Duration) -> usize {
    let (mut polls, mut at, mut wait) = (1, Duration::ZERO, first);
    while at + wait <= window {
        at += wait;
        polls += 1;
        wait = (wait * 2).min(max);
    }
    polls + 1
}

async fn queue(t: &TestDb) -> JobQueue {
    let queue = JobQueue::builder(&t.db)
        .poll_interval(FIRST)
        .max_poll_interval(MAX)
        .build()
        .unwrap();
    queue.set_up().await.unwrap();
    queue
}

/// Looks for jobs: each poll of an idle worker is one `find` of due jobs.
fn polls(t: &TestDb) -> usize {
    t.commands.count("find")
}

/// An idle worker backs off from the poll interval to the maximum, so over 4 s it looks for
/// jobs about 8 times, not 80; a job enqueued in this process wakes it at once and resets the
/// back-off.
#[tokio::test]
async fn an_idle_worker_backs_off_and_wakes_on_enqueue() {
    let t = testing::test_db("jobs_idle_backoff").await;
    let queue = queue(&t).await;
    let handler = Arc::new(Counting::default());
    t.commands.reset();
    let worker = queue.start_worker(handler.clone());
    let window = Duration::from_secs(4);
    tokio::time::sleep(window).await;
    let idle = polls(&t);
    let bound = idle_polls_within(window, FIRST, MAX);
    assert!(
        idle <= bound,
        "{idle} polls in {window:?} idle, the schedule allows {bound}"
    );
    assert!(
        idle >= 3,
        "the worker polls while idle: {:?}",
        t.commands.names()
    );

    queue.enqueue("wake", doc! {}).await.unwrap();
    queue
        .wait_until_drained(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(handler.0.load(Ordering::SeqCst), 1);
    // Back to the first interval: the next 800 ms hold polls at about 0, 50, 150, 350 and
    // 750 ms; a worker still at the maximum interval would poll once at most.
    t.commands.reset();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let after = polls(&t);
    assert!(after >= 3, "back-off reset after a job: {after} polls");
    worker.stop().await;
}

/// Dropping a worker's handle stops the worker: it sends nothing more (it spun before, 3,049
/// commands in 2 s).
#[tokio::test]
async fn dropping_the_handle_stops_the_worker() {
    let t = testing::test_db("jobs_dropped_handle").await;
    let queue = queue(&t).await;
    let handler = Arc::new(Counting::default());
    t.commands.reset();
    drop(queue.start_worker(handler.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let settled = t.commands.total();
    assert!(settled <= 2, "a dropped worker ran on: {settled} commands");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        t.commands.total(),
        settled,
        "a dropped worker sends nothing more: {:?}",
        t.commands.names()
    );
    queue.enqueue("left", doc! {}).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(handler.0.load(Ordering::SeqCst), 0, "no worker runs it");
    assert_eq!(queue.pending().await.unwrap(), 1);
}

/// The delivery's and the feed's workers run on the queue: idle, they back off the same way
/// (their queues keep the default schedule, 50 ms doubling to 2 s), and a dropped one stops.
#[tokio::test]
async fn delivery_and_feed_workers_back_off_and_stop_when_dropped() {
    let window = Duration::from_secs(3);
    let bound = idle_polls_within(window, FIRST, Duration::from_secs(2));

    let t = testing::test_db("jobs_delivery_worker").await;
    let graph = Arc::new(FollowGraph::new(&t.db));
    let delivery: Delivery<String> =
        Delivery::builder(&t.db, graph, Arc::new(FanOutOnWrite::new(&t.db)))
            .build()
            .unwrap();
    delivery.set_up().await.unwrap();
    t.commands.reset();
    let worker = delivery.start_worker();
    tokio::time::sleep(window).await;
    let idle = polls(&t);
    assert!(
        idle <= bound,
        "delivery worker: {idle} polls, at most {bound}"
    );
    worker.stop().await;
    t.commands.reset();
    drop(delivery.start_worker());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = t.commands.total();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(settled <= 2, "dropped delivery worker: {settled} commands");
    assert_eq!(t.commands.total(), settled, "dropped delivery worker");

    let t = testing::test_db("jobs_feed_worker").await;
    let feed: FeedStore<()> = FeedStore::builder(&t.db)
        .capabilities(t.info.capabilities())
        .build()
        .unwrap();
    feed.set_up().await.unwrap();
    t.commands.reset();
    let worker = feed.start_worker();
    tokio::time::sleep(window).await;
    let idle = polls(&t);
    assert!(idle <= bound, "feed worker: {idle} polls, at most {bound}");
    worker.stop().await;
    t.commands.reset();
    drop(feed.start_worker());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = t.commands.total();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(settled <= 2, "dropped feed worker: {settled} commands");
    assert_eq!(t.commands.total(), settled, "dropped feed worker");
}

/// A queue refuses a schedule it cannot keep.
#[tokio::test]
async fn poll_intervals_are_validated() {
    let t = testing::test_db("jobs_poll_validation").await;
    for (first, max) in [
        (Duration::ZERO, Duration::from_secs(1)),
        (Duration::from_secs(2), Duration::from_secs(1)),
    ] {
        let built = JobQueue::builder(&t.db)
            .poll_interval(first)
            .max_poll_interval(max)
            .build();
        assert!(
            matches!(built, Err(mongo_social::Error::InvalidConfig { .. })),
            "{first:?} to {max:?}"
        );
    }
}

/// A job needs a kind: empty and whitespace-only are the same error, and nothing is queued.
#[tokio::test]
async fn a_blank_job_kind_is_refused() {
    let t = testing::test_db("jobs_blank_kind").await;
    let queue = queue(&t).await;
    for blank in ["", " ", "\t "] {
        let refused = queue.enqueue(blank, doc! {}).await;
        assert!(
            matches!(
                refused,
                Err(mongo_social::Error::InvalidInput {
                    reason: Invalid::Blank { what: "job kind" },
                    ..
                })
            ),
            "{blank:?}: {refused:?}"
        );
    }
    assert_eq!(queue.pending().await.unwrap(), 0, "nothing queued");
}
