//! The fault-injecting proxy against the real server, and the stores riding out its faults.

use mongo_social_lab::SetUp;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongo_social::feed::{FeedStore, NewPost, NewUser};
use mongo_social::graph::FollowGraph;
use mongo_social::jobs::{Job, JobHandler, JobQueue};
use mongo_social::server::ServerInfo;
use mongo_social::PageRequest;
use mongo_social_lab::{self as testing, fault_proxy::FaultProxy};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;

#[tokio::test]
async fn proxy_forwards_cuts_refuses_and_stops() {
    let proxy = testing::fault_proxy();
    let client = proxy
        .client_with(|options| options.server_selection_timeout = Some(Duration::from_secs(1)))
        .await;
    let db = client.database(&testing::database_name("proxy_forwards"));
    first_ping(&db).await;
    assert!(proxy.connections_accepted() >= 1);
    assert!(proxy.open_connections() >= 1);

    // Refused for longer than the client waits for a server: the command fails, transiently.
    proxy.outage(Duration::from_secs(3));
    assert!(proxy.is_refusing());
    let error = db
        .run_command(doc! { "ping": 1 })
        .await
        .expect_err("no server while connections are refused");
    assert!(
        mongo_social::Error::from(error).is_retryable(),
        "an outage is transient"
    );

    // Once the outage ends, the client reconnects by itself.
    let mut answered = false;
    for _ in 0..40 {
        if db.run_command(doc! { "ping": 1 }).await.is_ok() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(answered, "the server answers again after the outage");
    assert!(
        proxy.connections_refused() >= 1,
        "reconnections were refused"
    );

    // A delay holds traffic but loses none.
    proxy.delay(Duration::from_millis(50));
    db.run_command(doc! { "ping": 1 })
        .await
        .expect("delayed ping");
    proxy.delay(Duration::ZERO);

    let address = proxy.address();
    drop(proxy);
    assert!(
        std::net::TcpStream::connect(address).is_err(),
        "a dropped proxy listens no more"
    );
}

/// The first command through a new proxy. On the sharded leg, DocumentDB's gateway binds its
/// listening socket anew after each connection it accepts and resets a connection that arrives in
/// between (here, one that another test of this binary opens at the same moment), so a first ping
/// that fails transiently is sent again, up to five times, with a note; any other error fails.
async fn first_ping(db: &mongodb::Database) {
    const TRIES: u32 = 5;
    for attempt in 1..=TRIES {
        match db.run_command(doc! { "ping": 1 }).await {
            Ok(_) => return,
            Err(error)
                if attempt < TRIES && mongo_social::Error::from(error.clone()).is_retryable() =>
            {
                eprintln!(
                    "NOTE first ping through the proxy failed (try {attempt} of {TRIES}): {error}"
                );
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            Err(error) => panic!("ping through the proxy: {error}"),
        }
    }
}

#[tokio::test]
async fn proxy_forwards_only_to_loopback() {
    let error = FaultProxy::start("192.0.2.1:27017").expect_err("not loopback");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

/// A handler that records each job as a document keyed by the job's id (a duplicate key is its
/// own earlier run: done), and counts its calls and its successful runs per job.
#[derive(Debug)]
struct RecordJobs {
    done: mongodb::Collection<bson::Document>,
    calls: AtomicUsize,
    successes: Mutex<HashMap<ObjectId, usize>>,
}

#[async_trait::async_trait]
impl JobHandler for RecordJobs {
    async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        match self.done.insert_one(doc! { "_id": job.id }).await {
            Ok(_) => {}
            // By its code: DocumentDB words the message without MongoDB's "E11000".
            Err(error) => {
                let error = mongo_social::Error::from(error);
                if error.code() != Some(11000) {
                    return Err(error);
                }
            }
        }
        *self
            .successes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(job.id)
            .or_default() += 1;
        Ok(())
    }
}

/// A worker rides out a 5-second outage: it keeps running, its rounds and handler calls during
/// the outage are bounded by its backoff, the claims of jobs whose handler failed are released
/// (so they run again long before the 60-second lease), and every job completes exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_rides_out_an_outage() {
    const JOBS: usize = 60;
    let test = testing::test_db("worker_rides_out_an_outage").await;
    let proxy = testing::fault_proxy();
    let client = proxy
        .client_with(|options| options.server_selection_timeout = Some(Duration::from_millis(500)))
        .await;
    let db = client.database(test.db.name());
    let queue = JobQueue::builder(&db)
        .batch(5)
        .retry_delay(Duration::from_millis(200))
        .build()
        .expect("queue");
    assert_eq!(queue.lease(), Duration::from_secs(60));
    // Set up through the test's own client: the proxy client's 500 ms server selection is for
    // the outage, not for a first connection (DocumentDB's gateway resets some that arrive
    // together, and the driver's monitor waits 500 ms before it tries again).
    JobQueue::new(&test.db).set_up().await.expect("indexes");
    let mut ids = Vec::new();
    for i in 0..JOBS {
        ids.push(
            queue
                .enqueue("record", doc! { "i": i as i64 })
                .await
                .expect("enqueue"),
        );
    }
    let handler = Arc::new(RecordJobs {
        done: db.collection("done"),
        calls: AtomicUsize::new(0),
        successes: Mutex::new(HashMap::new()),
    });
    let worker = queue.start_worker(handler.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;

    proxy.outage(Duration::from_secs(5));
    let (rounds_before, calls_before) =
        (worker.failed_rounds(), handler.calls.load(Ordering::SeqCst));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rounds_during = worker.failed_rounds() - rounds_before;
    let calls_during = handler.calls.load(Ordering::SeqCst) - calls_before;
    assert!(!worker.is_finished(), "the worker survives the outage");
    assert!(proxy.connections_refused() > 0, "the outage was felt");
    // Without backoff a worker would poll every 50 ms (about 100 rounds in 5 s) and try every
    // claimed job; with it, its commands retry within the policy and a failing handler's job
    // waits out its retry delay.
    assert!(
        rounds_during <= 5,
        "{rounds_during} failed rounds during the outage"
    );
    assert!(
        calls_during <= 15,
        "{calls_during} handler calls during the outage"
    );

    // Well inside the 60-second lease: the failed jobs' claims were released.
    let draining = std::time::Instant::now();
    if let Err(error) = queue.wait_until_drained(Duration::from_secs(30)).await {
        let everything = |name: &'static str| {
            let collection = test.collection::<bson::Document>(name);
            async move {
                let found: Vec<bson::Document> =
                    collection.find(doc! {}).await?.try_collect().await?;
                mongodb::error::Result::Ok(found)
            }
        };
        let (left, claims) = (everything("jobs").await, everything("jobs_locks").await);
        panic!(
            "every job finishes after the outage, long before its lease: {error}; worker's last \
             error {:?}; jobs left {left:?}; claims {claims:?}",
            worker.last_error()
        );
    }
    let drained_in = draining.elapsed();
    assert!(!worker.is_finished());
    worker.stop().await;

    assert_eq!(queue.failed().await.expect("failed"), 0);
    let locks = test.collection::<bson::Document>("jobs_locks");
    assert_eq!(
        locks.count_documents(doc! {}).await.expect("locks"),
        0,
        "no claim left"
    );
    let done = test.collection::<bson::Document>("done");
    assert_eq!(
        done.count_documents(doc! {}).await.expect("done") as usize,
        JOBS
    );
    let successes = handler
        .successes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for id in &ids {
        assert_eq!(
            successes.get(id),
            Some(&1),
            "job {id} completed exactly once"
        );
    }
    testing::note(&format!(
        "a_worker_rides_out_an_outage: {} handler calls for {JOBS} jobs, {calls_during} during the \
         outage, {rounds_during} failed rounds, drained {drained_in:.1?} after it",
        handler.calls.load(Ordering::SeqCst)
    ));
}

/// Follows and unfollows from a few concurrent owners through lost replies and a 3-second
/// outage, half of them on an impatient client and retry budget, so some operations fail.
/// Afterwards (each failed operation called again, the documented remedy): every subscription is
/// the last operation's, none twice, `recount` changes no count and `rebuild` changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_graph_survives_an_outage() {
    const OWNERS: usize = 4;
    const USERS: usize = 6;
    const ROUNDS: usize = 24;
    let test = testing::test_db("graph_survives_an_outage").await;
    let proxy = testing::fault_proxy();
    let client = proxy.client_with(|_| {}).await;
    let graph = Arc::new(FollowGraph::new(&client.database(test.db.name())));
    graph.set_up().await.expect("indexes");
    let impatient = proxy.impatient_client().await.database(test.db.name());
    let impatient = FollowGraph::builder(&impatient)
        .retry_policy(testing::impatient_retry())
        .build()
        .expect("impatient graph");
    let impatient = Arc::new(impatient);
    let users: Vec<String> = (0..USERS).map(|i| format!("u{i}")).collect();
    for user in &users {
        graph.add_user(user).await.expect("add user");
    }
    let mut tasks = Vec::new();
    for o in 0..OWNERS {
        let graph = if o % 2 == 0 { &graph } else { &impatient }.clone();
        let users = users.clone();
        tasks.push(tokio::spawn(async move {
            let owner = &users[o];
            let mut ops = Vec::new();
            for round in 0..ROUNDS {
                let user = &users[(o + 1 + round % (USERS - 1)) % USERS];
                // Each pair is followed, then unfollowed on its next turn, then followed again.
                let follow = (round / (USERS - 1)).is_multiple_of(2);
                let outcome = if follow {
                    graph.follow(owner, user).await
                } else {
                    graph.unfollow(owner, user).await
                };
                if let Err(error) = &outcome {
                    assert!(error.is_retryable(), "only transient failures: {error}");
                }
                ops.push((owner.clone(), user.clone(), follow, outcome.is_ok()));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ops
        }));
    }
    let ops: Vec<_> = proxy
        .outage_during(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();
    let failed = ops.iter().filter(|op| !op.3).count();

    // The last operation on each pair decides; if it failed, it is called again (an earlier
    // failed one was overtaken by the operations after it).
    let mut last: HashMap<(String, String), (bool, bool)> = HashMap::new();
    for (owner, user, follow, ok) in &ops {
        last.insert((owner.clone(), user.clone()), (*follow, *ok));
    }
    for ((owner, user), (follow, ok)) in &last {
        if !ok {
            if *follow {
                graph.follow(owner, user).await.expect("follow again");
            } else {
                graph.unfollow(owner, user).await.expect("unfollow again");
            }
        }
    }
    for ((owner, user), (follows, _)) in &last {
        let subscription = graph.subscription(owner, user).await.expect("subscription");
        assert_eq!(subscription.is_some(), *follows, "{owner} -> {user}");
    }
    for owner in &users {
        let mut query = PageRequest::first(50);
        let mut seen = HashSet::new();
        loop {
            let page = graph.following(owner, query).await.expect("following");
            for subscription in page.items {
                assert!(
                    seen.insert(subscription.user.clone()),
                    "{owner}: no duplicate"
                );
            }
            match page.next {
                Some(next) => query = PageRequest::after(50, next),
                None => break,
            }
        }
    }
    for user in &users {
        let stats = graph.stats(user).await.expect("stats");
        assert_eq!(
            graph.recount(user).await.expect("recount"),
            stats,
            "{user}: counts exact"
        );
        let report = graph.rebuild(user).await.expect("rebuild");
        assert_eq!(
            (report.created, report.corrected, report.removed),
            (0, 0, 0),
            "{user}: rebuild changes nothing"
        );
    }
    testing::note(&format!(
        "graph outage: {} operations, {failed} failed; proxy lost {} replies, refused {} \
         connections",
        ops.len(),
        proxy.replies_lost(),
        proxy.connections_refused()
    ));
    assert!(
        failed > 0
            || proxy
                .fails_during_outage(Duration::from_secs(2), impatient.stats("u0"))
                .await,
        "an impatient owner gave up during the outage"
    );
}

/// Likes and unlikes from a few concurrent users through lost replies and a 3-second outage,
/// half of them on an impatient client and retry budget, so some operations fail. Afterwards:
/// each post's `likes` counter equals its stored likes (no like counted twice or missed), and
/// each pair whose last operation returned `Ok` is in that state.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn likes_survive_an_outage() {
    const USERS: usize = 4;
    const POSTS: usize = 3;
    const ROUNDS: usize = 30;
    let test = testing::test_db("likes_survive_an_outage").await;
    let proxy = testing::fault_proxy();
    let client = proxy.client_with(|_| {}).await;
    let store: FeedStore<Document> = FeedStore::builder(&client.database(test.db.name()))
        .capabilities(test.info.capabilities())
        .build()
        .expect("store");
    store.set_up().await.expect("indexes");
    let users: Vec<String> = (0..USERS).map(|i| format!("u{i}")).collect();
    for user in &users {
        store
            .users()
            .create(NewUser::new(user, user))
            .await
            .expect("user");
    }
    let mut posts = Vec::new();
    for p in 0..POSTS {
        let post = store
            .posts()
            .create(NewPost::new(
                "u0",
                format!("post {p}"),
                "body",
                Document::new(),
            ))
            .await
            .expect("post");
        posts.push(post.id);
    }
    let impatient = proxy.impatient_client().await.database(test.db.name());
    let impatient: FeedStore<Document> = FeedStore::builder(&impatient)
        .capabilities(test.info.capabilities())
        .retry_policy(testing::impatient_retry())
        .build()
        .expect("impatient store");
    let (store, impatient) = (Arc::new(store), Arc::new(impatient));
    let mut tasks = Vec::new();
    for (u, user) in users.iter().cloned().enumerate() {
        let store = if u % 2 == 0 { &store } else { &impatient }.clone();
        let posts = posts.clone();
        tasks.push(tokio::spawn(async move {
            let mut ops = Vec::new();
            for round in 0..ROUNDS {
                let post = posts[(u + round) % POSTS];
                // Liked on one turn at a post, unliked on the next.
                let like = (round / POSTS).is_multiple_of(2);
                let outcome = if like {
                    store.likes().like(post, &user).await
                } else {
                    store.likes().unlike(post, &user).await
                };
                if let Err(error) = &outcome {
                    assert!(error.is_retryable(), "only transient failures: {error}");
                }
                ops.push((post, user.clone(), like, outcome.is_ok()));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ops
        }));
    }
    let ops: Vec<_> = proxy
        .outage_during(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();

    let likes = test.collection::<Document>("post_likes");
    for post in &posts {
        // A like or unlike cut off part-way leaves its pair marked until the pair's next call;
        // nobody calls again here, so the marks are finished first (each with its op id: a like
        // or unlike already applied is not applied again).
        store.likes().settle(*post).await.expect("settle likes");
        let stored = likes
            .count_documents(doc! { "post": post.0 })
            .await
            .expect("count likes");
        let counters = store.likes().counters(*post).await.expect("counters");
        assert_eq!(counters.likes, stored as i64, "{post:?}: counted once each");
    }
    let mut last = HashMap::new();
    for (post, user, like, ok) in &ops {
        last.insert((*post, user.clone()), (*like, *ok));
    }
    for ((post, user), (like, ok)) in &last {
        if *ok {
            assert_eq!(
                store.likes().is_liked(*post, user).await.expect("likes"),
                *like
            );
        }
    }
    let failed = ops.iter().filter(|op| !op.3).count();
    testing::note(&format!(
        "likes outage: {} operations, {failed} failed; proxy lost {} replies, refused {} \
         connections",
        ops.len(),
        proxy.replies_lost(),
        proxy.connections_refused()
    ));
    assert!(
        failed > 0
            || proxy
                .fails_during_outage(Duration::from_secs(2), impatient.users().get("u0"))
                .await,
        "an impatient user gave up during the outage"
    );
}

/// A reply lost while the server is detected (to `buildInfo`, and where the server is probed,
/// to a probe's `createIndexes`) is retried, never taken for a missing capability: detection
/// through a proxy that loses those replies finds what detection finds directly.
#[tokio::test]
async fn detection_rides_out_lost_replies() {
    let direct = testing::server_info().await.capabilities();
    for lost in ["buildInfo", "createIndexes"] {
        let proxy = Arc::new(testing::fault_proxy());
        let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (trigger, seen) = (proxy.clone(), fired.clone());
        let client = proxy
            .client_with(|options| {
                // The event comes before the command is sent: its reply is the next one.
                options.command_event_handler = Some(EventHandler::callback(move |event| {
                    if let CommandEvent::Started(started) = event {
                        if started.command_name == lost && !seen.swap(true, Ordering::SeqCst) {
                            trigger.lose_next_reply();
                        }
                    }
                }))
            })
            .await;
        let name = testing::database_name("detection_rides_out_lost_replies");
        let detected = ServerInfo::detect_for(&client.database(&name))
            .await
            .unwrap_or_else(|error| panic!("detected after losing the reply to {lost}: {error}"));
        if testing::skip_unless(
            fired.load(Ordering::SeqCst),
            "detection_rides_out_lost_replies (a probe's lost reply)",
            "the server is not probed (MongoDB, FerretDB 1.x): its version tells what it can do",
        ) {
            continue;
        }
        assert!(proxy.replies_lost() > 0, "the reply to {lost} was lost");
        assert_eq!(
            detected.capabilities(),
            direct,
            "the capabilities detected through the lost reply to {lost}"
        );
        let _ = client.database(&name).drop().await;
    }
}
