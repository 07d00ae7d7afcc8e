//! Background delivery to followers against the real server: thousands of followers reached
//! exactly once, a worker killed mid-job, dormant followers, every inbox strategy, bad input.

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use futures::TryStreamExt;
use mongo_social::delivery::Delivery;
use mongo_social::graph::FollowGraph;
use mongo_social::{
    error::Entity, BucketedFanOut, DynInboxStore, Error, FanOutOnRead, FanOutOnWrite, InboxStore,
    NewMessage, PageRequest,
};
use mongo_social_lab::{self as testing, TestDb};

/// `n` followers of `author`, written straight into the graph's collections (the documented
/// layout) so that thousands take a second to set up; each follower seen now.
async fn followers(t: &TestDb, author: &str, n: usize) -> Vec<String> {
    let fans: Vec<String> = (0..n).map(|i| format!("fan{i:05}")).collect();
    let now = bson::DateTime::now();
    let mut users = vec![doc! { "_id": author, "followers": n as i64, "following": 0_i64 }];
    users.extend(
        fans.iter()
            .map(|fan| doc! { "_id": fan, "followers": 0_i64, "following": 1_i64 }),
    );
    t.collection::<Document>("graph_users")
        .insert_many(users)
        .await
        .unwrap();
    let subscriptions = fans
        .iter()
        .map(|fan| doc! { "owner": fan, "user": author, "origins": ["!"], "since": now });
    t.collection::<Document>("subscriptions")
        .insert_many(subscriptions)
        .await
        .unwrap();
    let seen = fans.iter().map(|fan| doc! { "_id": fan, "last_seen": now });
    t.collection::<Document>("user_activity")
        .insert_many(seen)
        .await
        .unwrap();
    fans
}

async fn delivery(
    t: &TestDb,
    inbox: Arc<DynInboxStore<String>>,
    configure: impl FnOnce(
        mongo_social::delivery::DeliveryBuilder<String>,
    ) -> mongo_social::delivery::DeliveryBuilder<String>,
) -> (Arc<FollowGraph>, Delivery<String>) {
    let graph = Arc::new(FollowGraph::new(&t.db));
    graph.set_up().await.unwrap();
    let delivery = configure(Delivery::builder(&t.db, graph.clone(), inbox))
        .build()
        .unwrap();
    delivery.set_up().await.unwrap();
    (graph, delivery)
}

/// How many copies of message `id` each recipient holds in the fan-out-on-write collection.
async fn copies(t: &TestDb, id: bson::oid::ObjectId) -> HashMap<String, usize> {
    let found: Vec<Document> = t
        .collection::<Document>("inbox_copies")
        .find(doc! { "id": id })
        .projection(doc! { "recipient": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut counts = HashMap::new();
    for copy in &found {
        *counts
            .entry(copy.get_str("recipient").unwrap().to_owned())
            .or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_followers_each_get_one_copy() {
    let t = testing::test_db("delivery_thousands").await;
    let (_graph, delivery) =
        delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| b.batch(250)).await;
    let fans = followers(&t, "star", 2_000).await;
    let workers: Vec<_> = (0..2).map(|_| delivery.start_worker()).collect();
    let posted = delivery
        .post("star", "Hello, everyone".to_owned())
        .await
        .unwrap();
    // The author's copy is written before `post` returns.
    let own = delivery
        .inbox()
        .inbox_page("star", PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(own.items[0].id, posted.id);
    delivery
        .wait_until_drained(Duration::from_secs(120))
        .await
        .unwrap();
    for worker in workers {
        assert_eq!(worker.last_error(), None);
        worker.stop().await;
    }
    let counts = copies(&t, posted.id.0).await;
    assert_eq!(
        counts.len(),
        fans.len() + 1,
        "every follower and the author"
    );
    assert!(counts.values().all(|&n| n == 1), "exactly one copy each");
    assert!(fans.iter().all(|fan| counts.contains_key(fan)));
    let page = delivery
        .inbox()
        .inbox_page("fan01234", PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(page.items[0].payload, "Hello, everyone");
    assert_eq!(page.items[0].sent, posted.sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_worker_leaves_its_job_to_another() {
    let t = testing::test_db("delivery_killed_worker").await;
    let (_graph, delivery) = delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| {
        b.batch(100).job_lease(Duration::from_millis(700))
    })
    .await;
    let fans = followers(&t, "star", 1_500).await;
    let posted = delivery
        .post("star", "Survive this".to_owned())
        .await
        .unwrap();
    let doomed = delivery.start_worker();
    // Kill the first worker once it has delivered part of the fan-out.
    let copies_collection = t.collection::<Document>("inbox_copies");
    for _ in 0..2_000 {
        let delivered = copies_collection
            .count_documents(doc! { "id": posted.id.0 })
            .await
            .unwrap();
        if delivered > 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    doomed.abort();
    let partial = copies(&t, posted.id.0).await.len();
    let rescuer = delivery.start_worker();
    delivery
        .wait_until_drained(Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(rescuer.last_error(), None);
    rescuer.stop().await;
    let counts = copies(&t, posted.id.0).await;
    assert_eq!(
        counts.len(),
        fans.len() + 1,
        "nothing lost (killed after {partial})"
    );
    assert!(counts.values().all(|&n| n == 1), "nothing duplicated");
}

#[tokio::test]
async fn dormant_followers_get_no_copies_until_seen_again() {
    let t = testing::test_db("delivery_dormant").await;
    let (graph, delivery) = delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| b).await;
    for user in ["author", "active", "dormant", "never"] {
        graph.add_user(user).await.unwrap();
    }
    for fan in ["active", "dormant", "never"] {
        graph.follow(fan, "author").await.unwrap();
    }
    assert!(
        delivery.touch("active").await.unwrap(),
        "never seen before: returning"
    );
    delivery.run_pending().await.unwrap(); // its (empty) rebuild
    assert!(!delivery.touch("active").await.unwrap(), "seen just now");
    let eight_days_ago =
        bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 8 * 86_400_000);
    t.collection::<Document>("user_activity")
        .insert_one(doc! { "_id": "dormant", "last_seen": eight_days_ago })
        .await
        .unwrap();
    let first = delivery.post("author", "one".to_owned()).await.unwrap();
    assert_eq!(delivery.run_pending().await.unwrap(), 1);
    let counts = copies(&t, first.id.0).await;
    let mut reached: Vec<&str> = counts.keys().map(String::as_str).collect();
    reached.sort();
    assert_eq!(reached, ["active", "author"]);

    assert!(
        delivery.touch("dormant").await.unwrap(),
        "back after 8 days"
    );
    let second = delivery.post("author", "two".to_owned()).await.unwrap();
    delivery.run_pending().await.unwrap();
    let mut reached: Vec<String> = copies(&t, second.id.0).await.into_keys().collect();
    reached.sort();
    assert_eq!(reached, ["active", "author", "dormant"]);
    // The returning user's rebuild also brought the post they missed while dormant.
    let inbox = delivery
        .inbox()
        .inbox_page("dormant", PageRequest::first(10))
        .await
        .unwrap();
    let texts: Vec<&str> = inbox.items.iter().map(|m| m.payload.as_str()).collect();
    assert_eq!(texts, ["two", "one"]);
}

/// Every page of `owner`'s timeline, `limit` at a time.
async fn timeline(delivery: &Delivery<String>, owner: &str, limit: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut request = PageRequest::first(limit);
    loop {
        let page = delivery.timeline(owner, request).await.unwrap();
        assert!(page.items.len() <= limit);
        all.extend(page.items.into_iter().map(|m| m.payload));
        match page.next {
            Some(next) => request = PageRequest::after(limit, next),
            None => return all,
        }
    }
}

#[tokio::test]
async fn a_returning_user_reads_a_complete_timeline_while_the_inbox_rebuilds() {
    let t = testing::test_db("delivery_returning").await;
    let (graph, delivery) = delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| b).await;
    for user in ["sleepy", "ann", "bob"] {
        graph.add_user(user).await.unwrap();
    }
    graph.follow("sleepy", "ann").await.unwrap();
    graph.follow("sleepy", "bob").await.unwrap();
    let long_ago =
        bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 30 * 86_400_000);
    t.collection::<Document>("user_activity")
        .insert_one(doc! { "_id": "sleepy", "last_seen": long_ago })
        .await
        .unwrap();
    let mut expected = Vec::new();
    for i in 0..6 {
        let author = if i % 2 == 0 { "ann" } else { "bob" };
        delivery
            .post(author, format!("{author} {i}"))
            .await
            .unwrap();
        expected.insert(0, format!("{author} {i}"));
    }
    delivery.run_pending().await.unwrap();
    assert_eq!(
        delivery.inbox().count("sleepy").await.unwrap(),
        0,
        "dormant: no copies"
    );

    assert!(delivery.touch("sleepy").await.unwrap());
    // Before any worker ran the rebuild: complete and in order, read from the outbox.
    for limit in [1, 4, 10] {
        assert_eq!(
            timeline(&delivery, "sleepy", limit).await,
            expected,
            "pages of {limit}"
        );
    }
    let first = delivery
        .timeline("sleepy", PageRequest::first(2))
        .await
        .unwrap();
    delivery.run_pending().await.unwrap();
    assert_eq!(
        delivery.inbox().count("sleepy").await.unwrap(),
        6,
        "rebuilt"
    );
    // A cursor from the rebuilding phase carries on over the rebuilt inbox.
    let rest = delivery
        .timeline("sleepy", PageRequest::after(10, first.next.unwrap()))
        .await
        .unwrap();
    let mut read: Vec<String> = first.items.into_iter().map(|m| m.payload).collect();
    read.extend(rest.items.into_iter().map(|m| m.payload));
    assert_eq!(read, expected);
    assert_eq!(timeline(&delivery, "sleepy", 4).await, expected);
}

#[tokio::test]
async fn celebrities_are_merged_at_read_time() {
    use mongo_social::inbox::InboxLifecycle;
    let t = testing::test_db("delivery_celebrity").await;
    let inbox = Arc::new(FanOutOnWrite::<String>::new(&t.db));
    let (graph, delivery) = delivery(&t, inbox.clone(), |b| b.celebrity_followers(Some(3))).await;
    for user in ["star", "pal", "fan1", "fan2", "fan3", "loner"] {
        graph.add_user(user).await.unwrap();
        delivery.touch(user).await.unwrap();
    }
    delivery.run_pending().await.unwrap();
    for fan in ["fan1", "fan2", "fan3"] {
        graph.follow(fan, "star").await.unwrap();
    }
    graph.follow("fan1", "pal").await.unwrap();
    let mut expected = Vec::new();
    for i in 0..8 {
        let author = if i % 3 == 0 { "pal" } else { "star" };
        delivery
            .post(author, format!("{author} {i}"))
            .await
            .unwrap();
        expected.insert(0, format!("{author} {i}"));
    }
    assert!(delivery.is_celebrity("star").await.unwrap());
    assert!(!delivery.is_celebrity("pal").await.unwrap());
    delivery.run_pending().await.unwrap();
    // Only pal's posts were copied; star's are merged in when fan1 reads.
    assert_eq!(delivery.inbox().count("fan1").await.unwrap(), 3);
    for limit in [1, 2, 3, 5, 20] {
        assert_eq!(
            timeline(&delivery, "fan1", limit).await,
            expected,
            "pages of {limit}"
        );
    }
    let star_only: Vec<String> = expected
        .iter()
        .filter(|p| p.starts_with("star"))
        .cloned()
        .collect();
    assert_eq!(timeline(&delivery, "fan2", 2).await, star_only);
    assert!(timeline(&delivery, "loner", 5).await.is_empty());
    // The activity, the inbox page, the celebrities, which of them fan1 follows, fan1's mute
    // and block lists, the celebrities' posts.
    t.commands.reset();
    delivery
        .timeline("fan1", PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(t.commands.names(), ["find"; 6]);
    // A muted or blocked celebrity is left out, as their copies would be hidden; unmuted, back.
    inbox.mute("fan2", "star").await.unwrap();
    inbox.block("fan3", "star").await.unwrap();
    assert!(timeline(&delivery, "fan2", 5).await.is_empty());
    assert!(timeline(&delivery, "fan3", 5).await.is_empty());
    inbox.unmute("fan2", "star").await.unwrap();
    assert_eq!(timeline(&delivery, "fan2", 2).await, star_only);
    // Unfollowing a celebrity takes their posts out of the timeline at once.
    delivery.unfollow("fan2", "star").await.unwrap();
    assert!(timeline(&delivery, "fan2", 5).await.is_empty());
}

#[tokio::test]
async fn following_backfills_and_unfollowing_cleans_up() {
    let t = testing::test_db("delivery_backfill").await;
    let (graph, delivery) =
        delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| b.backfill(3)).await;
    for user in ["author", "other", "newcomer"] {
        graph.add_user(user).await.unwrap();
    }
    graph.follow("newcomer", "other").await.unwrap();
    delivery.touch("newcomer").await.unwrap();
    delivery.run_pending().await.unwrap();
    for i in 0..5 {
        delivery.post("author", format!("a{i}")).await.unwrap();
    }
    delivery.post("other", "o0".to_owned()).await.unwrap();
    delivery.run_pending().await.unwrap();
    assert_eq!(timeline(&delivery, "newcomer", 10).await, ["o0"]);

    assert!(delivery.follow("newcomer", "author").await.unwrap());
    assert_eq!(
        timeline(&delivery, "newcomer", 2).await,
        ["o0", "a4", "a3", "a2"]
    );
    assert!(
        !delivery.follow("newcomer", "author").await.unwrap(),
        "again: nothing new"
    );
    assert_eq!(
        delivery.inbox().count("newcomer").await.unwrap(),
        4,
        "no second copies"
    );

    assert!(delivery.unfollow("newcomer", "author").await.unwrap());
    assert_eq!(timeline(&delivery, "newcomer", 10).await, ["o0"]);
    assert!(!delivery.unfollow("newcomer", "author").await.unwrap());

    // A bucketed inbox cannot remove messages: a typed error, before anything is written.
    let t = testing::test_db("delivery_backfill_buckets").await;
    let (graph, bucketed) = self::delivery(&t, Arc::new(BucketedFanOut::new(&t.db)), |b| b).await;
    for user in ["author", "newcomer"] {
        graph.add_user(user).await.unwrap();
    }
    bucketed.post("author", "a0".to_owned()).await.unwrap();
    bucketed.follow("newcomer", "author").await.unwrap();
    assert_eq!(bucketed.inbox().count("newcomer").await.unwrap(), 1);
    let error = bucketed.unfollow("newcomer", "author").await.unwrap_err();
    assert!(matches!(error, Error::Unsupported { .. }), "{error}");
    assert!(graph
        .subscription("newcomer", "author")
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn fan_out_works_through_every_inbox_strategy() {
    type MakeStore = fn(&mongodb::Database) -> Arc<DynInboxStore<String>>;
    let stores: Vec<(&str, MakeStore)> = vec![
        ("read", |db| Arc::new(FanOutOnRead::new(db))),
        ("write", |db| Arc::new(FanOutOnWrite::new(db))),
        ("buckets", |db| Arc::new(BucketedFanOut::new(db))),
    ];
    for (name, make) in stores {
        let t = testing::test_db(&format!("delivery_strategy_{name}")).await;
        let (_graph, delivery) = delivery(&t, make(&t.db), |b| b.batch(16)).await;
        let fans = followers(&t, "author", 40).await;
        let mut posted = Vec::new();
        for i in 0..3 {
            posted.push(delivery.post("author", format!("post {i}")).await.unwrap());
        }
        // Each post's fan-out runs twice over, as after a crash: still one copy each.
        delivery.run_pending().await.unwrap();
        for message in &posted {
            delivery
                .inbox()
                .deliver(message, &fans[..20])
                .await
                .unwrap();
        }
        for fan in fans.iter().step_by(7) {
            let page = delivery
                .inbox()
                .inbox_page(fan, PageRequest::first(10))
                .await
                .unwrap();
            let mut texts: Vec<&str> = page.items.iter().map(|m| m.payload.as_str()).collect();
            if delivery.inbox().strategy() == mongo_social::inbox::Strategy::BucketedFanOut {
                // Buckets keep arrival order, and the three fan-outs ran interleaved.
                texts.sort_unstable_by(|a, b| b.cmp(a));
            }
            assert_eq!(texts, ["post 2", "post 1", "post 0"], "{name}: {fan}");
        }
        assert_eq!(delivery.jobs().pending().await.unwrap(), 0);
    }
}

/// A follower who blocks the author gets no copy (not even after unblocking); one who mutes
/// the author gets it hidden until unmuting; through every inbox strategy.
#[tokio::test]
async fn fan_out_honours_mute_and_block() {
    use mongo_social::inbox::DynInboxLifecycle;
    type MakeStore = fn(&mongodb::Database) -> Arc<DynInboxLifecycle<String>>;
    let stores: Vec<(&str, MakeStore)> = vec![
        ("read", |db| Arc::new(FanOutOnRead::new(db))),
        ("write", |db| Arc::new(FanOutOnWrite::new(db))),
        ("buckets", |db| Arc::new(BucketedFanOut::new(db))),
    ];
    for (name, make) in stores {
        let t = testing::test_db(&format!("delivery_filters_{name}")).await;
        let inbox = make(&t.db);
        let (_graph, delivery) = delivery(&t, inbox.clone(), |b| b.batch(16)).await;
        let fans = followers(&t, "author", 3).await;
        inbox.block(&fans[1], "author").await.unwrap();
        inbox.mute(&fans[2], "author").await.unwrap();
        let post = delivery.post("author", "hello".to_owned()).await.unwrap();
        delivery.run_pending().await.unwrap();
        let shown = |fan: &str| {
            let inbox = inbox.clone();
            let fan = fan.to_owned();
            async move {
                let page = inbox.inbox_page(&fan, PageRequest::first(5)).await.unwrap();
                let ids: Vec<_> = page.items.iter().map(|m| m.id).collect();
                assert_eq!(inbox.count(&fan).await.unwrap(), ids.len() as u64);
                ids
            }
        };
        assert_eq!(shown(&fans[0]).await, [post.id], "{name}");
        assert!(shown(&fans[1]).await.is_empty(), "{name}: blocked");
        assert!(shown(&fans[2]).await.is_empty(), "{name}: muted");
        assert_eq!(inbox.unread_count(&fans[2]).await.unwrap(), 0, "{name}");
        inbox.unmute(&fans[2], "author").await.unwrap();
        assert_eq!(shown(&fans[2]).await, [post.id], "{name}: unmuted");
        inbox.unblock(&fans[1], "author").await.unwrap();
        assert!(shown(&fans[1]).await.is_empty(), "{name}: never delivered");
    }
}

#[tokio::test]
async fn bad_input_writes_nothing() {
    let t = testing::test_db("delivery_bad_input").await;
    let (graph, delivery) = delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| b).await;
    graph.add_user("someone").await.unwrap();
    let before = t.documents(&[]).await;
    let error = delivery.post("nobody", "x".to_owned()).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::User,
                ..
            }
        ),
        "{error}"
    );
    // Empty and whitespace-only ids are the same error, as in every module.
    for blank in ["", " ", "\t "] {
        for result in [
            delivery.post(blank, "x".to_owned()).await.map(drop),
            delivery.touch(blank).await.map(drop),
            delivery.follow(blank, "someone").await.map(drop),
            delivery.follow("someone", blank).await.map(drop),
            delivery.unfollow(blank, "someone").await.map(drop),
            delivery
                .timeline(blank, PageRequest::first(5))
                .await
                .map(drop),
        ] {
            assert!(
                matches!(
                    result,
                    Err(Error::InvalidInput {
                        reason: Invalid::Blank {
                            what: "sender" | "user" | "owner"
                        },
                        ..
                    })
                ),
                "{blank:?}: {result:?}"
            );
        }
    }
    assert_eq!(t.documents(&[]).await, before, "nothing written");
    // Larger than the inbox takes: refused before the job, the outbox or any copy.
    let buckets =
        Delivery::<String>::builder(&t.db, graph.clone(), Arc::new(BucketedFanOut::new(&t.db)))
            .collection_prefix("b_")
            .build()
            .unwrap();
    let error = buckets
        .post("someone", "x".repeat(400_000))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::TooLarge {
                    what: "message",
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(t.documents(&[]).await, before, "nothing written");
    let error =
        Delivery::<String>::builder(&t.db, graph.clone(), Arc::new(FanOutOnWrite::new(&t.db)))
            .batch(0)
            .build()
            .unwrap_err();
    assert!(matches!(error, Error::InvalidConfig { .. }), "{error}");
    let error = Delivery::<String>::builder(&t.db, graph, Arc::new(BucketedFanOut::new(&t.db)))
        .celebrity_followers(Some(10))
        .build()
        .unwrap_err();
    assert!(matches!(error, Error::InvalidConfig { .. }), "{error}");
    // A bucketed inbox's cursor, where the timeline's inbox orders by send time.
    let bucketed = BucketedFanOut::new(&t.db);
    for text in ["a", "b"] {
        bucketed
            .send(NewMessage::new("ann", ["someone"], text.to_owned()))
            .await
            .unwrap();
    }
    let cursor = InboxStore::<String>::inbox_page(&bucketed, "someone", PageRequest::first(1))
        .await
        .unwrap()
        .next
        .unwrap();
    let error = delivery
        .timeline("someone", PageRequest::after(5, cursor))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Cursor { .. },
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_post_and_a_timeline_page_cost_what_the_docs_say() {
    let t = testing::test_db("delivery_commands").await;
    let (graph, delivery) = delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| b).await;
    for user in ["ann", "bob"] {
        graph.add_user(user).await.unwrap();
    }
    graph.follow("bob", "ann").await.unwrap();
    t.commands.reset();
    delivery.post("ann", "counted".to_owned()).await.unwrap();
    // The author check, the job, the outbox, the author's mute and block lists, the author's
    // copy.
    assert_eq!(
        t.commands.names(),
        ["find", "insert", "insert", "find", "insert"]
    );
    t.commands.reset();
    delivery
        .timeline("bob", PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(t.commands.names(), ["find", "find", "find"]);
}

/// Setup is idempotent: a second delivery (the application's next start) over the same database
/// creates its indexes again (outbox, jobs and inbox) and reads what the first delivered.
#[tokio::test]
async fn reopen_reads_what_was_delivered() {
    let t = testing::test_db("delivery_reopen").await;
    let (graph, first) = delivery(&t, Arc::new(FanOutOnWrite::new(&t.db)), |b| b).await;
    let fans = followers(&t, "author", 3).await;
    let posted = first.post("author", "hello".to_owned()).await.unwrap();
    first.run_pending().await.unwrap();
    let second = Delivery::builder(&t.db, graph, Arc::new(FanOutOnWrite::new(&t.db)))
        .build()
        .unwrap();
    second.set_up().await.expect("indexes on the next start");
    second.set_up().await.expect("indexes again");
    for fan in &fans {
        let page = second.timeline(fan, PageRequest::first(5)).await.unwrap();
        assert_eq!(page.items, std::slice::from_ref(&posted), "{fan}");
    }
}
