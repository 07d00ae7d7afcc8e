//! An unreachable database, as every store reports it: `Error::Unreachable`, within the client's
//! server selection timeout (plus the retries of a lost connection), whatever the operation.
//!
//! Each store runs on a client whose every connection the fault proxy refuses, with a
//! 1-second server selection timeout and the default 10-second retry budget: an operation that
//! took the budget (retrying "no server" as if it could pass, the defect this checks) would take
//! ten times as long as one that reports the outage once the driver has waited for a server.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mongo_social::comments::{
    Author, CommentStore, Embedded, HybridPages, NewComment, Order, PerComment, Vote,
};
use mongo_social::delivery::Delivery;
use mongo_social::feed::{FeedKind, FeedStore, NewPost, NewUser};
use mongo_social::graph::FollowGraph;
use mongo_social::inbox::UpTo;
use mongo_social::jobs::JobQueue;
use mongo_social::notifications::{Activity, Kind, NotificationStore};
use mongo_social::{
    inbox::DynInboxLifecycle, BucketedFanOut, Error, FanOutOnRead, FanOutOnWrite, NewMessage,
    PageRequest,
};
use mongo_social_lab::{self as testing, fault_proxy::FaultProxy};
use mongodb::Database;

/// The client's server selection timeout.
const SELECTION: Duration = Duration::from_secs(1);
/// Longest an operation may take to report the outage: the driver's wait for a server, once
/// for detection and once for the operation, and slack for a loaded machine; far below the
/// 10-second retry budget.
const WITHIN: Duration = Duration::from_secs(5);

/// A database on a proxy that refuses every connection for the rest of the test.
async fn unreachable(name: &str) -> (FaultProxy, Database) {
    let proxy = testing::fault_proxy();
    proxy.refuse_for(Duration::from_secs(3600));
    let client = proxy
        .client_with(|options| options.server_selection_timeout = Some(SELECTION))
        .await;
    let db = client.database(&testing::database_name(name));
    (proxy, db)
}

/// Runs `operation` and asserts it failed with `Error::Unreachable` within [`WITHIN`].
async fn reports<T: std::fmt::Debug>(
    what: &str,
    operation: impl Future<Output = mongo_social::Result<T>>,
) {
    let started = Instant::now();
    let outcome = operation.await;
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::Unreachable { .. })),
        "{what}: {outcome:?}"
    );
    assert!(took < WITHIN, "{what}: reported after {took:?}");
}

fn inboxes(db: &Database) -> Vec<(&'static str, Arc<DynInboxLifecycle<String>>)> {
    vec![
        ("fan out on read", Arc::new(FanOutOnRead::new(db))),
        ("fan out on write", Arc::new(FanOutOnWrite::new(db))),
        ("buckets", Arc::new(BucketedFanOut::new(db))),
    ]
}

#[tokio::test]
async fn every_inbox_operation_reports_an_unreachable_database() {
    let (proxy, db) = unreachable("unreachable_inbox").await;
    for (name, inbox) in inboxes(&db) {
        let message = NewMessage::new("joe", ["bob", "ann"], "hi".to_owned());
        reports(&format!("{name}: send"), inbox.send(message)).await;
        reports(
            &format!("{name}: page"),
            inbox.inbox_page("bob", PageRequest::first(10)),
        )
        .await;
        reports(&format!("{name}: count"), inbox.count("bob")).await;
        reports(&format!("{name}: unread"), inbox.unread_count("bob")).await;
        reports(
            &format!("{name}: mark read"),
            inbox.mark_read_up_to("bob", UpTo::Newest),
        )
        .await;
        reports(&format!("{name}: mute"), inbox.mute("bob", "joe")).await;
        reports(&format!("{name}: filters"), inbox.filters("bob")).await;
    }
    assert!(proxy.connections_refused() > 0);
}

#[tokio::test]
async fn every_comment_operation_reports_an_unreachable_database() {
    let (_proxy, db) = unreachable("unreachable_comments").await;
    // Each with a link of the strategy's own form (a slug path, a position path, a slug).
    let stores: Vec<(&str, Arc<dyn CommentStore>, &str)> = vec![
        ("per comment", Arc::new(PerComment::new(&db)), "0a1b2c3d"),
        ("embedded", Arc::new(Embedded::new(&db)), "0"),
        (
            "hybrid",
            Arc::new(HybridPages::new(&db)),
            "0000000000000001",
        ),
    ];
    for (name, store, link) in stores {
        reports(&format!("{name}: create"), store.create_discussion("d1")).await;
        let comment = NewComment::new(Author::new("u1", "Ann"), "hello");
        reports(&format!("{name}: post"), store.post("d1", comment)).await;
        reports(
            &format!("{name}: page"),
            store.chronological("d1", Order::OldestFirst, PageRequest::first(10)),
        )
        .await;
        reports(&format!("{name}: count"), store.count("d1")).await;
        reports(
            &format!("{name}: vote"),
            store.vote("d1", link, "u2", Vote::Up),
        )
        .await;
    }
}

#[tokio::test]
async fn the_graph_feed_delivery_notifications_and_jobs_report_an_unreachable_database() {
    let (_proxy, db) = unreachable("unreachable_others").await;
    let graph = FollowGraph::new(&db);
    reports("graph: follow", graph.follow("a", "b")).await;
    reports(
        "graph: following",
        graph.following("a", PageRequest::first(10)),
    )
    .await;

    let feed: FeedStore<()> = FeedStore::builder(&db).build().unwrap();
    reports(
        "feed: create user",
        feed.users().create(NewUser::new("ann", "ann")),
    )
    .await;
    reports(
        "feed: post",
        feed.posts()
            .create(NewPost::new("ann", "Hello", "First", ())),
    )
    .await;
    reports(
        "feed: latest",
        feed.feeds().page(&FeedKind::Latest, PageRequest::first(10)),
    )
    .await;

    let inbox: Arc<DynInboxLifecycle<String>> = Arc::new(FanOutOnWrite::new(&db));
    let delivery = Delivery::builder(&db, Arc::new(FollowGraph::new(&db)), inbox)
        .build()
        .unwrap();
    reports(
        "delivery: timeline",
        delivery.timeline("ann", PageRequest::first(10)),
    )
    .await;

    let notifications: NotificationStore<()> = NotificationStore::new(&db);
    reports(
        "notifications: notify",
        notifications.notify(Activity::new("ann", Kind::Like, "p1", "bob")),
    )
    .await;
    reports(
        "notifications: page",
        notifications.page("ann", PageRequest::first(10)),
    )
    .await;

    let jobs = JobQueue::new(&db);
    reports("jobs: enqueue", jobs.enqueue("mail", bson::doc! {})).await;
    reports("jobs: pending", jobs.pending()).await;
}
