//! Idempotency keys (issue 32) on every store that creates, against the real server: a repeat
//! returns the first result and writes nothing; the same key with other content is a conflict
//! that writes nothing; concurrent first attempts store one thing; a repeat after a lost reply
//! stores one. And notifications that cannot be delivered never fail the write that caused them.

use mongo_social_lab::SetUp;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mongo_social::comments::{
    Author, CommentStore, Embedded, HybridPages, NewComment, PerComment, ThreadedComments,
};
use mongo_social::feed::{FeedStore, NewPost, NewUser};
use mongo_social::notifications::{Activity, Event, Kind, NotificationStore};
use mongo_social::{
    error::Entity, BucketedFanOut, DynInboxStore, Error, FanOutOnRead, FanOutOnWrite, FollowGraph,
    NewMessage, PageRequest,
};
use mongo_social_lab::{self as testing, fault_proxy::FaultProxy, TestDb};
use mongodb::Database;

/// Commands that write.
const WRITES: [&str; 4] = ["insert", "update", "delete", "findAndModify"];

/// Runs `repeat` and checks it wrote nothing: no writing command, every collection unchanged
/// (leased locks aside, which come and go).
async fn writes_nothing<T>(t: &TestDb, repeat: impl Future<Output = T>) -> T {
    let except = lock_collections(t).await;
    let except: Vec<&str> = except.iter().map(String::as_str).collect();
    let before = t.snapshot(&except).await;
    let (output, names) = t.commands.measure(repeat).await;
    let writes: Vec<&String> = names
        .iter()
        .filter(|name| WRITES.contains(&name.as_str()))
        .collect();
    assert!(writes.is_empty(), "a repeat wrote: {names:?}");
    assert_eq!(
        t.snapshot(&except).await,
        before,
        "a repeat changed the data"
    );
    output
}

async fn lock_collections(t: &TestDb) -> Vec<String> {
    let mut names = t.db.list_collection_names().await.unwrap();
    names.retain(|name| name.ends_with("_locks"));
    names
}

fn is_conflict<T: std::fmt::Debug>(result: mongo_social::Result<T>, what: Entity) {
    match result {
        Err(Error::Conflict { what: seen, .. }) => assert_eq!(seen, what),
        other => panic!("expected a conflict of a {what}, got {other:?}"),
    }
}

/// A proxy to the test server and a database of `t` through it.
async fn proxied(t: &TestDb) -> (FaultProxy, Database) {
    let proxy = testing::fault_proxy();
    let db = proxy.client_with(|_| {}).await.database(t.db.name());
    (proxy, db)
}

// --- Inboxes --------------------------------------------------------------------------------

type Inbox = Arc<DynInboxStore<String>>;
/// A strategy's name and how to build it.
type MakeInbox = (&'static str, fn(&Database) -> Inbox);

fn inboxes() -> [MakeInbox; 3] {
    [
        ("read", |db| Arc::new(FanOutOnRead::new(db))),
        ("write", |db| Arc::new(FanOutOnWrite::new(db))),
        ("bucketed", |db| Arc::new(BucketedFanOut::new(db))),
    ]
}

fn hello(key: &str) -> NewMessage<String> {
    NewMessage::new("joe", ["bob", "jane"], "Hi!".to_string()).with_key(key)
}

async fn shown(inbox: &Inbox, owner: &str) -> Vec<mongo_social::inbox::MessageId> {
    let page = inbox
        .inbox_page(owner, PageRequest::first(50))
        .await
        .unwrap();
    page.items.iter().map(|message| message.id).collect()
}

#[tokio::test]
async fn inbox_repeats_return_the_first_send_and_write_nothing() {
    for (name, make) in inboxes() {
        let t = testing::test_db(&format!("idem_inbox_repeat_{name}")).await;
        let inbox = make(&t.db);
        inbox.set_up().await.unwrap();
        let first = inbox.send(hello("k1")).await.unwrap();
        let again = writes_nothing(&t, inbox.send(hello("k1"))).await.unwrap();
        assert_eq!(again, first, "{name}");
        // Other content under the key: refused, nothing written.
        let other = NewMessage::new("joe", ["bob"], "Hi!".to_string()).with_key("k1");
        is_conflict(writes_nothing(&t, inbox.send(other)).await, Entity::Message);
        let payload = NewMessage::new("joe", ["bob", "jane"], "Bye".to_string()).with_key("k1");
        is_conflict(
            writes_nothing(&t, inbox.send(payload)).await,
            Entity::Message,
        );
        // Another sender may use the same key; a blank key is refused.
        let ann = NewMessage::new("ann", ["bob"], "Yo".to_string()).with_key("k1");
        assert_ne!(inbox.send(ann).await.unwrap().message.id, first.message.id);
        let blank = NewMessage::new("ann", ["bob"], "Yo".to_string()).with_key(" ");
        assert!(inbox.send(blank).await.unwrap_err().is_invalid_input());
        assert_eq!(shown(&inbox, "jane").await, [first.message.id], "{name}");
        assert_eq!(inbox.count("bob").await.unwrap(), 2, "{name}");
    }
}

#[tokio::test]
async fn inbox_concurrent_first_sends_store_one_message() {
    for (name, make) in inboxes() {
        let t = testing::test_db(&format!("idem_inbox_concurrent_{name}")).await;
        let inbox = make(&t.db);
        inbox.set_up().await.unwrap();
        let sends: Vec<_> = (0..8)
            .map(|_| {
                let inbox = inbox.clone();
                tokio::spawn(async move { inbox.send(hello("k-concurrent")).await })
            })
            .collect();
        let mut sent = Vec::new();
        for send in sends {
            sent.push(send.await.unwrap().unwrap());
        }
        assert!(sent.iter().all(|s| s == &sent[0]), "{name}: {sent:?}");
        for owner in ["bob", "jane"] {
            assert_eq!(shown(&inbox, owner).await, [sent[0].message.id], "{name}");
        }
    }
}

#[tokio::test]
async fn inbox_repeat_after_a_lost_reply_stores_one() {
    for (name, make) in inboxes() {
        let t = testing::test_db(&format!("idem_inbox_lost_{name}")).await;
        let (proxy, through) = proxied(&t).await;
        let inbox = make(&t.db);
        inbox.set_up().await.unwrap();
        let flaky = make(&through);
        flaky.count("bob").await.unwrap(); // connected, capabilities known
        proxy.lose_replies_for(Duration::from_millis(400));
        let first = flaky.send(hello("k-lost")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(proxy.replies_lost() > 0, "{name}: a reply was lost");
        let again = inbox.send(hello("k-lost")).await.unwrap();
        if let Ok(first) = first {
            assert_eq!(first, again, "{name}");
        }
        for owner in ["bob", "jane"] {
            assert_eq!(shown(&inbox, owner).await, [again.message.id], "{name}");
        }
    }
}

// --- Comments -------------------------------------------------------------------------------

/// A strategy's name and how to build it.
type MakeComments = (&'static str, fn(&Database) -> Arc<dyn CommentStore>);

fn comment_stores() -> [MakeComments; 3] {
    [
        ("per_comment", |db| Arc::new(PerComment::new(db))),
        ("embedded", |db| Arc::new(Embedded::new(db))),
        ("hybrid", |db| {
            Arc::new(HybridPages::builder(db).page_size(3).build().unwrap())
        }),
    ]
}

fn say(who: &str, text: &str, key: &str) -> NewComment {
    NewComment::new(Author::new(who, who), text).with_key(key)
}

async fn comment_store(
    test: &str,
    make: fn(&Database) -> Arc<dyn CommentStore>,
) -> (TestDb, Arc<dyn CommentStore>) {
    let t = testing::test_db(test).await;
    let store = make(&t.db);
    store.set_up().await.unwrap();
    store.create_discussion("d").await.unwrap();
    (t, store)
}

#[tokio::test]
async fn comment_repeats_return_the_first_comment_and_write_nothing() {
    for (name, make) in comment_stores() {
        let (t, store) = comment_store(&format!("idem_comment_repeat_{name}"), make).await;
        // Some comments first, so pages fill (and roll over, for hybrid pages).
        for i in 0..4 {
            store
                .post("d", say("ann", &format!("c{i}"), &format!("pre{i}")))
                .await
                .unwrap();
        }
        let first = store.post("d", say("ann", "hello", "k1")).await.unwrap();
        let again = writes_nothing(&t, store.post("d", say("ann", "hello", "k1")))
            .await
            .unwrap();
        assert_eq!(again, first, "{name}");
        is_conflict(
            writes_nothing(&t, store.post("d", say("ann", "other", "k1"))).await,
            Entity::Comment,
        );
        is_conflict(
            writes_nothing(&t, store.post("d", say("bob", "hello", "k1"))).await,
            Entity::Comment,
        );
        // The key is the discussion's: another discussion may use it.
        store.create_discussion("e").await.unwrap();
        assert_eq!(
            store
                .post("e", say("ann", "hello", "k1"))
                .await
                .unwrap()
                .text,
            "hello"
        );
        let blank = store.post("d", say("ann", "hello", "")).await.unwrap_err();
        assert!(blank.is_invalid_input(), "{name}: {blank}");
        assert_eq!(store.count("d").await.unwrap(), 5, "{name}");

        if let Some(threads) = store.threaded() {
            let reply = threads
                .reply("d", &first.link, say("bob", "hi", "r1"))
                .await
                .unwrap();
            let again = writes_nothing(&t, threads.reply("d", &first.link, say("bob", "hi", "r1")))
                .await
                .unwrap();
            assert_eq!(again, reply, "{name}");
            // The same key for another parent, or for a top-level post: a conflict.
            let other = store.post("d", say("cat", "x", "k2")).await.unwrap();
            is_conflict(
                writes_nothing(&t, threads.reply("d", &other.link, say("bob", "hi", "r1"))).await,
                Entity::Comment,
            );
            is_conflict(
                writes_nothing(&t, store.post("d", say("bob", "hi", "r1"))).await,
                Entity::Comment,
            );
            assert_eq!(store.count("d").await.unwrap(), 7, "{name}");
        }
    }
}

#[tokio::test]
async fn comment_concurrent_first_attempts_store_one() {
    for (name, make) in comment_stores() {
        let (_t, store) = comment_store(&format!("idem_comment_concurrent_{name}"), make).await;
        store.post("d", say("ann", "first", "pre")).await.unwrap();
        let posts: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.post("d", say("ann", "hello", "k-c")).await })
            })
            .collect();
        let mut posted = Vec::new();
        for post in posts {
            posted.push(post.await.unwrap().unwrap());
        }
        assert!(
            posted
                .iter()
                .all(|c| c.link == posted[0].link && c.posted == posted[0].posted),
            "{name}: {posted:?}"
        );
        assert_eq!(store.count("d").await.unwrap(), 2, "{name}");
        if store.threaded().is_some() {
            let parent = posted[0].link.clone();
            let replies: Vec<_> = (0..8)
                .map(|_| {
                    let store = store.clone();
                    let parent = parent.clone();
                    tokio::spawn(async move {
                        let threads = store.threaded().unwrap();
                        threads.reply("d", &parent, say("bob", "hi", "r-c")).await
                    })
                })
                .collect();
            let mut replied = Vec::new();
            for reply in replies {
                replied.push(reply.await.unwrap().unwrap());
            }
            assert!(
                replied.iter().all(|c| c.link == replied[0].link),
                "{name}: {replied:?}"
            );
            assert_eq!(store.count("d").await.unwrap(), 3, "{name}");
        }
    }
}

#[tokio::test]
async fn comment_repeat_after_a_lost_reply_stores_one() {
    for (name, make) in comment_stores() {
        let (t, store) = comment_store(&format!("idem_comment_lost_{name}"), make).await;
        let (proxy, through) = proxied(&t).await;
        let flaky = make(&through);
        flaky.count("d").await.unwrap();
        proxy.lose_replies_for(Duration::from_millis(400));
        let first = flaky.post("d", say("ann", "hello", "k-lost")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(proxy.replies_lost() > 0, "{name}: a reply was lost");
        let again = store
            .post("d", say("ann", "hello", "k-lost"))
            .await
            .unwrap();
        if let Ok(first) = first {
            assert_eq!(first.link, again.link, "{name}");
        }
        assert_eq!(store.count("d").await.unwrap(), 1, "{name}");
        if let Some(threads) = flaky.threaded() {
            proxy.lose_replies_for(Duration::from_millis(400));
            let first = threads
                .reply("d", &again.link, say("bob", "hi", "r-lost"))
                .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert!(proxy.replies_lost() > 0, "{name}: a reply was lost");
            let threads = store.threaded().unwrap();
            let reply = threads
                .reply("d", &again.link, say("bob", "hi", "r-lost"))
                .await
                .unwrap();
            if let Ok(first) = first {
                assert_eq!(first.link, reply.link, "{name}");
            }
            assert_eq!(store.count("d").await.unwrap(), 2, "{name}");
        }
    }
}

// --- Feed posts -----------------------------------------------------------------------------

async fn feed(t: &TestDb, db: &Database) -> FeedStore<()> {
    let feed: FeedStore<()> = FeedStore::builder(db).build().unwrap();
    feed.set_up().await.unwrap();
    if feed.users().get("ann").await.is_err() {
        feed.users()
            .create(NewUser::new("ann", "ann"))
            .await
            .unwrap();
    }
    let _ = t;
    feed
}

fn trip(key: &str) -> NewPost<()> {
    NewPost::new("ann", "Trip", "Photos", ()).with_key(key)
}

async fn posts_of(t: &TestDb) -> u64 {
    t.collection::<bson::Document>("posts")
        .count_documents(bson::doc! {})
        .await
        .unwrap()
}

#[tokio::test]
async fn post_repeats_conflicts_and_concurrency() {
    let t = testing::test_db("idem_posts").await;
    let feed = feed(&t, &t.db).await;
    let first = feed.posts().create(trip("k1")).await.unwrap();
    let again = writes_nothing(&t, feed.posts().create(trip("k1")))
        .await
        .unwrap();
    assert_eq!(again, first);
    let other = NewPost::new("ann", "Trip", "Other photos", ()).with_key("k1");
    is_conflict(
        writes_nothing(&t, feed.posts().create(other)).await,
        Entity::Post,
    );
    assert_eq!(posts_of(&t).await, 1);
    let creates: Vec<_> = (0..8)
        .map(|_| {
            let feed = feed.clone();
            tokio::spawn(async move { feed.posts().create(trip("k-c")).await })
        })
        .collect();
    let mut created = Vec::new();
    for create in creates {
        created.push(create.await.unwrap().unwrap());
    }
    assert!(created.iter().all(|p| p == &created[0]), "{created:?}");
    assert_eq!(posts_of(&t).await, 2);
    // Each post's fan-out job ran once and the feeds show each once.
    feed.run_pending().await.unwrap();
    assert_eq!(feed.jobs().pending().await.unwrap(), 0);
}

#[tokio::test]
async fn post_repeat_after_a_lost_reply_stores_one() {
    let t = testing::test_db("idem_posts_lost").await;
    let (proxy, through) = proxied(&t).await;
    let good = feed(&t, &t.db).await;
    let flaky = feed(&t, &through).await;
    proxy.lose_replies_for(Duration::from_millis(400));
    let first = flaky.posts().create(trip("k-lost")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(proxy.replies_lost() > 0, "a reply was lost");
    let again = good.posts().create(trip("k-lost")).await.unwrap();
    if let Ok(first) = first {
        assert_eq!(first, again);
    }
    assert_eq!(posts_of(&t).await, 1);
    assert_eq!(good.posts().get(again.id).await.unwrap(), again);
}

// --- Notification events --------------------------------------------------------------------

fn mention(actor: &str, key: &str) -> Event<String> {
    Event::new(Activity::new("ann", Kind::Mention, "post-1", actor)).with_key(key)
}

#[tokio::test]
async fn event_repeats_conflicts_and_concurrency() {
    let t = testing::test_db("idem_events").await;
    let store: NotificationStore<String> = NotificationStore::new(&t.db);
    store.set_up().await.unwrap();
    store.notify(mention("bob", "k1")).await.unwrap();
    writes_nothing(&t, store.notify(mention("bob", "k1")))
        .await
        .unwrap();
    is_conflict(
        writes_nothing(&t, store.notify(mention("cat", "k1"))).await,
        Entity::Notification,
    );
    let data = mention("bob", "k1").with_data("other".to_owned());
    is_conflict(
        writes_nothing(&t, store.notify(data)).await,
        Entity::Notification,
    );
    let notifies: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.notify(mention("cat", "k-c")).await })
        })
        .collect();
    for notify in notifies {
        notify.await.unwrap().unwrap();
    }
    let page = store.page("ann", PageRequest::first(10)).await.unwrap();
    assert_eq!(page.items.len(), 1, "records are not groups: {page:?}");
    assert_eq!(page.items[0].actor_count, 2);
    assert_eq!(store.counts("ann").await.unwrap().unseen, 1);
    assert_eq!(
        store.trim("ann", 1).await.unwrap(),
        0,
        "records are not trimmed"
    );
}

#[tokio::test]
async fn event_repeat_after_a_lost_reply_applies_once() {
    let t = testing::test_db("idem_events_lost").await;
    let (proxy, through) = proxied(&t).await;
    let good: NotificationStore<String> = NotificationStore::new(&t.db);
    let flaky: NotificationStore<String> = NotificationStore::new(&through);
    flaky.counts("ann").await.unwrap();
    proxy.lose_replies_for(Duration::from_millis(400));
    let _ = flaky.notify(mention("bob", "k-lost")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(proxy.replies_lost() > 0, "a reply was lost");
    good.notify(mention("bob", "k-lost")).await.unwrap();
    let page = good.page("ann", PageRequest::first(10)).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].actor_count, 1);
}

// --- Notifications that cannot be delivered -------------------------------------------------

/// A notification store behind a proxy refusing every connection, until `heal`.
async fn unreachable_notifications(t: &TestDb) -> (FaultProxy, Arc<NotificationStore<String>>) {
    let proxy = testing::fault_proxy();
    let db = proxy.impatient_client().await.database(t.db.name());
    let store = Arc::new(NotificationStore::new(&db));
    store.set_up().await.unwrap();
    proxy.refuse_for(Duration::from_secs(600));
    proxy.cut();
    (proxy, store)
}

/// Runs `run_pending` until nothing is pending (failed runs are retried after their back-off).
async fn deliver(outbox: &mongo_social::notifications::Outbox) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while outbox.pending().await.unwrap() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the outbox did not drain"
        );
        outbox.run_pending().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_reply_whose_notification_fails_is_stored_once_and_notified_later() {
    let t = testing::test_db("idem_unreachable_replies").await;
    let (proxy, notifications) = unreachable_notifications(&t).await;
    let per_comment = PerComment::builder(&t.db)
        .notifier(notifications.clone())
        .build()
        .unwrap();
    let embedded = Embedded::builder(&t.db)
        .notifier(notifications.clone())
        .build()
        .unwrap();
    let stores: [(
        &dyn ThreadedComments,
        &mongo_social::notifications::Outbox,
        &str,
    ); 2] = [
        (&per_comment, per_comment.outbox().unwrap(), "per-comment"),
        (&embedded, embedded.outbox().unwrap(), "embedded"),
    ];
    let mut replies = Vec::new();
    for (store, outbox, discussion) in stores {
        store.set_up().await.unwrap();
        store.create_discussion(discussion).await.unwrap();
        let top = store
            .post(discussion, say("ann", "hello", "top"))
            .await
            .unwrap();
        let reply = store
            .reply(discussion, &top.link, say("bob", "hi", "reply"))
            .await
            .expect("the reply is stored whatever the notification does");
        let again = store
            .reply(discussion, &top.link, say("bob", "hi", "reply"))
            .await
            .unwrap();
        assert_eq!(again, reply, "{discussion}");
        assert_eq!(store.count(discussion).await.unwrap(), 2, "{discussion}");
        assert_eq!(
            outbox.pending().await.unwrap(),
            1,
            "{discussion}: queued once"
        );
        replies.push((discussion, top.link));
    }
    proxy.refuse_for(Duration::ZERO);
    for (_, outbox, _) in stores {
        deliver(outbox).await;
    }
    let groups = notifications
        .page("ann", PageRequest::first(10))
        .await
        .unwrap()
        .items;
    for (discussion, link) in replies {
        let target = format!("{discussion}/{link}");
        let group = groups.iter().find(|g| g.target == target).unwrap();
        assert_eq!(
            (group.kind.clone(), group.actors.clone()),
            (Kind::Reply, vec!["bob".to_owned()])
        );
        assert_eq!(group.actor_count, 1);
    }
    assert_eq!(groups.len(), 2);
}

#[tokio::test]
async fn follows_and_likes_whose_notification_fails_succeed_and_notify_later() {
    let t = testing::test_db("idem_unreachable_follows").await;
    let (proxy, notifications) = unreachable_notifications(&t).await;
    let graph = FollowGraph::builder(&t.db)
        .notifier(notifications.clone())
        .build()
        .unwrap();
    for user in ["ann", "bob"] {
        graph.add_user(user).await.unwrap();
    }
    assert!(graph.follow("bob", "ann").await.unwrap());
    let feed: FeedStore<()> = FeedStore::builder(&t.db)
        .notifier(notifications.clone())
        .build()
        .unwrap();
    feed.set_up().await.unwrap();
    feed.users()
        .create(NewUser::new("ann", "ann"))
        .await
        .unwrap();
    feed.users()
        .create(NewUser::new("bob", "bob"))
        .await
        .unwrap();
    let post = feed
        .posts()
        .create(NewPost::new("ann", "Hi", "", ()))
        .await
        .unwrap();
    assert!(feed.likes().like(post.id, "bob").await.unwrap());
    proxy.refuse_for(Duration::ZERO);
    deliver(graph.outbox().unwrap()).await;
    deliver(feed.outbox().unwrap()).await;
    let groups = notifications
        .page("ann", PageRequest::first(10))
        .await
        .unwrap()
        .items;
    let mut kinds: Vec<(Kind, u64)> = groups
        .iter()
        .map(|g| (g.kind.clone(), g.actor_count))
        .collect();
    kinds.sort_by_key(|(kind, _)| kind.as_str().to_owned());
    assert_eq!(kinds, [(Kind::Follow, 1), (Kind::Like, 1)]);
}
