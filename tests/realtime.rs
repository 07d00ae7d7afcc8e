//! Watches against the real server: every change reported once and in order, across polls,
//! change streams, resumed tokens and dropped connections.

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mongo_social::notifications::{Activity, Group, Kind, NotificationStore};
use mongo_social::realtime::{Mode, ResumeToken, Update, Updates, WatchOptions};
use mongo_social::Error;
use mongo_social_lab as testing;

type Store = NotificationStore<()>;

fn like(post: &str, actor: &str) -> Activity {
    Activity::new("ann", Kind::Like, post, actor)
}

/// The modes this server supports, with a printed reason for any it does not: polling
/// everywhere, change streams where the server has them, and (for `faithful`) only where they
/// behave as MongoDB's: a position to resume from as soon as one opens, and no event lost among
/// concurrent writes. mongo-java-server's give no position before a first event, and stamp an
/// event before storing it, so a stream can pass over one written concurrently with another;
/// `Mode::Auto` polls there.
async fn modes(test: &str, t: &testing::TestDb, faithful: bool) -> Vec<Mode> {
    let mut modes = vec![Mode::Polling, Mode::Auto];
    let streams = t.info.capabilities().change_streams;
    if testing::skip_unless(streams, test, "change streams (polling is checked instead)") {
        return modes;
    }
    if faithful {
        let opened = t
            .collection::<bson::Document>("probe")
            .watch()
            .await
            .expect("a change stream opens");
        if testing::skip_unless(
            opened.resume_token().is_some(),
            test,
            "change streams as MongoDB's, resumable from when they open and losing no \
             concurrent write (not mongo-java-server's; `Mode::Auto` polls there)",
        ) {
            return modes;
        }
    }
    modes.push(Mode::ChangeStreams);
    modes
}

/// The next update, within 20 s.
async fn next_update<T>(mode: Mode, updates: &mut Updates<T>) -> Update<T> {
    tokio::time::timeout(Duration::from_secs(20), updates.next())
        .await
        .unwrap_or_else(|_| panic!("{mode:?}: no update within 20 s"))
        .expect("the stream goes on")
        .expect("no error")
}

/// Waits until the clock has left the millisecond of the last write: a watch reports what is
/// stamped from the millisecond it is asked for on, so an item written just before it, in the
/// same millisecond, would be reported too.
async fn next_millisecond() {
    tokio::time::sleep(Duration::from_millis(2)).await;
}

fn options(mode: Mode) -> WatchOptions {
    WatchOptions::default()
        .mode(mode)
        .poll_interval(Duration::from_millis(20))
}

/// Reads updates until `done` holds for the newest state of every group seen, checking that a
/// group's reports only ever grow (a report is never repeated nor older than one before it).
async fn read_until(
    mode: Mode,
    updates: &mut Updates<Group<()>>,
    seen: &mut BTreeMap<String, u64>,
    mut done: impl FnMut(&BTreeMap<String, u64>) -> bool,
) -> Option<ResumeToken> {
    let mut token = None;
    while !done(seen) {
        let update = tokio::time::timeout(Duration::from_secs(20), updates.next())
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: no update within 20 s, at {seen:?}"))
            .expect("the stream goes on")
            .expect("no error");
        let Update { item, token: t } = update;
        let before = seen.insert(item.id.clone(), item.actor_count).unwrap_or(0);
        assert!(
            item.actor_count > before,
            "{}: reported at {} after {before}",
            item.target,
            item.actor_count
        );
        token = Some(t);
    }
    token
}

#[tokio::test]
async fn concurrent_joins_are_reported_once_and_resume_from_a_token() {
    let t = testing::test_db("watch_notifications").await;
    let store: Arc<Store> = Arc::new(NotificationStore::new(&t.db));
    store.set_up().await.unwrap();
    store.notify(like("old", "zed")).await.unwrap(); // before the watch: not reported
    next_millisecond().await;
    for mode in modes("concurrent_joins_are_reported_once", &t, true).await {
        let prefix = format!("{mode:?}");
        let mut updates = store.watch("ann", None, options(mode));
        // The watch starts when first polled: an update of its own starts it.
        store
            .notify(like(&format!("{prefix}-start"), "amy"))
            .await
            .unwrap();
        let mut seen = BTreeMap::new();
        read_until(mode, &mut updates, &mut seen, |seen| seen.len() == 1).await;
        // 4 posts, 8 fans each, liked at once.
        let writers: Vec<_> = (0..32)
            .map(|i| {
                let store = store.clone();
                let post = format!("{prefix}-p{}", i % 4);
                tokio::spawn(async move {
                    store.notify(like(&post, &format!("fan{i}"))).await.unwrap();
                })
            })
            .collect();
        let token = read_until(mode, &mut updates, &mut seen, |seen| {
            seen.len() == 5 && seen.values().filter(|&&count| count == 8).count() == 4
        })
        .await
        .unwrap();
        for writer in writers {
            writer.await.unwrap();
        }
        drop(updates);
        assert!(!seen.keys().any(|id| id.contains("old")), "{seen:?}");

        // While nobody watches, more likes; a watch from the token reports only those.
        for i in 0..6 {
            let post = format!("{prefix}-p{}", i % 2);
            store
                .notify(like(&post, &format!("late{i}")))
                .await
                .unwrap();
        }
        let token: ResumeToken = token.to_string().parse().unwrap();
        let mut resumed = store.watch("ann", Some(token), options(mode));
        read_until(mode, &mut resumed, &mut seen, |seen| {
            seen.values().filter(|&&count| count == 11).count() == 2
        })
        .await;
        // Nothing else was pending.
        let quiet = tokio::time::timeout(Duration::from_millis(300), resumed.next()).await;
        assert!(quiet.is_err(), "{mode:?}: nothing more: {quiet:?}");
    }
}

#[tokio::test]
async fn a_token_from_another_watch_is_refused() {
    let t = testing::test_db("watch_foreign_token").await;
    let store: Arc<Store> = Arc::new(NotificationStore::new(&t.db));
    let mut bob = store.watch("bob", None, options(Mode::Polling));
    store
        .notify(Activity::new("bob", Kind::Follow, "bob", "cat"))
        .await
        .unwrap();
    let token = bob.next().await.unwrap().unwrap().token;
    let mut ann = store.watch("ann", Some(token), options(Mode::Polling));
    let error = ann.next().await.unwrap().unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Cursor { .. },
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        ann.next().await.is_none(),
        "the stream ends after its error"
    );
    let mut blank = store.watch(" ", None, options(Mode::Polling));
    assert!(matches!(
        blank.next().await,
        Some(Err(Error::InvalidInput {
            reason: Invalid::Blank { what: "recipient" },
            ..
        }))
    ));
}

#[tokio::test]
async fn polling_costs_one_find_per_poll() {
    let t = testing::test_db("watch_poll_cost").await;
    let store: Arc<Store> = Arc::new(NotificationStore::new(&t.db));
    store.set_up().await.unwrap();
    store.notify(like("p0", "amy")).await.unwrap(); // capabilities detected
    next_millisecond().await;
    let mut updates = store.watch("ann", None, options(Mode::Polling));
    let waiting = tokio::spawn(async move { updates.next().await.map(|u| u.map(|u| u.item)) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    t.commands.reset();
    // Some polls, however slow the machine.
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if t.commands.total() >= 3 {
            break;
        }
    }
    let names = t.commands.names();
    assert!(!waiting.is_finished(), "{:?}", waiting.await);
    assert!(names.len() >= 3, "it polls: {names:?}");
    assert!(names.iter().all(|name| name == "find"), "{names:?}");
    store.notify(like("p1", "bob")).await.unwrap();
    let group = waiting.await.unwrap().unwrap().unwrap();
    assert_eq!((group.target.as_str(), group.actor_count), ("p1", 1));
}

#[tokio::test]
async fn a_watch_survives_dropped_connections() {
    let t = testing::test_db("watch_outage").await;
    let proxy = testing::fault_proxy();
    let database = proxy.client_with(|_| {}).await.database(t.db.name());
    let watched: Store = NotificationStore::builder(&database)
        .capabilities(t.info.capabilities())
        .build()
        .unwrap();
    let store: Store = NotificationStore::new(&t.db);
    for mode in modes("a_watch_survives_dropped_connections", &t, false).await {
        let prefix = format!("{mode:?}");
        let mut updates = watched.watch("ann", None, options(mode));
        // Two updates before the faults: the second one reaches a change stream as an event,
        // so the stream has a position to resume from on every server (mongo-java-server's
        // give none before a first event).
        let mut seen = BTreeMap::new();
        for (n, post) in ["start", "second"].into_iter().enumerate() {
            store
                .notify(like(&format!("{prefix}-{post}"), "amy"))
                .await
                .unwrap();
            read_until(mode, &mut updates, &mut seen, |seen| seen.len() == n + 1).await;
        }
        for i in 0..10 {
            if i == 3 {
                proxy.cut();
            }
            if i == 6 {
                proxy.outage(Duration::from_millis(500));
            }
            store
                .notify(like(&format!("{prefix}-p"), &format!("fan{i}")))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        read_until(mode, &mut updates, &mut seen, |seen| {
            seen.values().any(|&count| count == 10)
        })
        .await;
    }
}

#[tokio::test]
async fn a_feed_watch_reports_posts_as_they_enter() {
    use mongo_social::feed::{FeedKind, FeedStore, NewPost, NewUser};
    use mongo_social::graph::FollowList;
    let t = testing::test_db("watch_feed").await;
    // A reader and an author per mode: a watch without a token starts at the start of its
    // second, so one mode's posts must not reach the next mode's feed.
    let follows = Arc::new(FollowList::from_pairs([
        ("bob0", "ann0"),
        ("bob1", "ann1"),
        ("bob2", "ann2"),
    ]));
    let feed: FeedStore<()> = FeedStore::builder(&t.db).follows(follows).build().unwrap();
    feed.set_up().await.unwrap();
    for user in ["ann0", "ann1", "ann2", "bob0", "bob1", "bob2", "cat"] {
        feed.users().create(NewUser::new(user, user)).await.unwrap();
    }
    let modes = modes("a_feed_watch_reports_posts_as_they_enter", &t, false).await;
    for (n, mode) in modes.into_iter().enumerate() {
        let (ann, bob) = (format!("ann{n}"), FeedKind::User(format!("bob{n}")));
        let mut updates = feed.feeds().watch(&bob, None, options(mode));
        let mut made = Vec::new();
        for i in 0..5 {
            let author = if i == 2 { "cat" } else { ann.as_str() }; // bob does not follow cat
            let post = feed
                .posts()
                .create(NewPost::new(author, format!("{mode:?} {i}"), "body", ()))
                .await
                .unwrap();
            if author == ann {
                made.push(post.id);
            }
        }
        feed.run_pending().await.unwrap();
        let mut reported = Vec::new();
        let mut token = None;
        while reported.len() < made.len() {
            let update = tokio::time::timeout(Duration::from_secs(20), updates.next())
                .await
                .unwrap_or_else(|_| panic!("{mode:?}: no update within 20 s"))
                .unwrap()
                .unwrap();
            reported.push(update.item.id);
            token = Some(update.token);
        }
        assert_eq!(
            reported, made,
            "{mode:?}: each of ann's posts once, in order"
        );
        drop(updates);
        // One more while nobody watches; a watch from the token reports it alone.
        let last = feed
            .posts()
            .create(NewPost::new(&ann, format!("{mode:?} last"), "body", ()))
            .await
            .unwrap();
        feed.run_pending().await.unwrap();
        let mut resumed = feed.feeds().watch(&bob, token, options(mode));
        let next = tokio::time::timeout(Duration::from_secs(20), resumed.next())
            .await
            .unwrap_or_else(|_| panic!("{mode:?}: no update within 20 s"))
            .unwrap()
            .unwrap();
        assert_eq!(next.item.id, last.id, "{mode:?}");
        let quiet = tokio::time::timeout(Duration::from_millis(300), resumed.next()).await;
        assert!(quiet.is_err(), "{mode:?}: nothing more");
    }
}

/// Every strategy's inbox watch: 16 concurrent senders, one of them muted: every message the
/// inbox shows reported once, in each mode the server has; then a watch from a token reports
/// exactly what came meanwhile.
#[tokio::test]
async fn inbox_watches_report_every_arrival_once() {
    use mongo_social::inbox::DynInboxLifecycle;
    use mongo_social::{BucketedFanOut, FanOutOnRead, FanOutOnWrite, Message, NewMessage};
    use std::collections::BTreeSet;
    let t = testing::test_db("watch_inbox").await;
    let stores: Vec<(&str, Arc<DynInboxLifecycle<String>>)> = vec![
        ("read", Arc::new(FanOutOnRead::new(&t.db))),
        ("write", Arc::new(FanOutOnWrite::new(&t.db))),
        (
            "buckets",
            Arc::new(
                BucketedFanOut::builder(&t.db)
                    .bucket_size(5)
                    .build()
                    .unwrap(),
            ),
        ),
    ];
    let modes = modes("inbox_watches_report_every_arrival_once", &t, true).await;
    for (name, store) in stores {
        store.set_up().await.unwrap();
        for mode in &modes {
            let owner = format!("{name}-{mode:?}");
            store.mute(&owner, "muted").await.unwrap();
            // Before the watch: not reported.
            store
                .send(NewMessage::new(
                    "early",
                    [owner.as_str()],
                    "before".to_owned(),
                ))
                .await
                .unwrap();
            next_millisecond().await;
            let mut updates = store.watch(&owner, None, options(*mode));
            let senders: Vec<_> = (0..16)
                .map(|s| {
                    let (store, owner) = (store.clone(), owner.clone());
                    tokio::spawn(async move {
                        let from = if s == 0 {
                            "muted".to_owned()
                        } else {
                            format!("s{s}")
                        };
                        for i in 0..3 {
                            let text = format!("{from} {i}");
                            let to = [owner.as_str(), "someone-else"];
                            store.send(NewMessage::new(&from, to, text)).await.unwrap();
                        }
                    })
                })
                .collect();
            let expected: BTreeSet<String> = (1..16)
                .flat_map(|s| (0..3).map(move |i| format!("s{s} {i}")))
                .collect();
            let mut seen = BTreeSet::new();
            let mut token = None;
            while seen.len() < expected.len() {
                let update = tokio::time::timeout(Duration::from_secs(30), updates.next())
                    .await
                    .unwrap_or_else(|_| panic!("{name} {mode:?}: stuck at {}", seen.len()))
                    .unwrap()
                    .unwrap();
                let message: Message<String> = update.item;
                assert!(
                    seen.insert(message.payload.clone()),
                    "{name} {mode:?}: {} twice",
                    message.payload
                );
                token = Some(update.token);
            }
            for sender in senders {
                sender.await.unwrap();
            }
            assert_eq!(seen, expected, "{name} {mode:?}");
            drop(updates);
            store
                .send(NewMessage::new(
                    "late",
                    [owner.as_str()],
                    "while away".to_owned(),
                ))
                .await
                .unwrap();
            let mut resumed = store.watch(&owner, token, options(*mode));
            let next = tokio::time::timeout(Duration::from_secs(30), resumed.next())
                .await
                .unwrap_or_else(|_| panic!("{name} {mode:?}: nothing after resuming"))
                .unwrap()
                .unwrap();
            assert_eq!(next.item.payload, "while away", "{name} {mode:?}");
            let quiet = tokio::time::timeout(Duration::from_millis(300), resumed.next()).await;
            assert!(quiet.is_err(), "{name} {mode:?}: nothing more");
        }
    }
}

/// A timeline watch: copied posts (through the inbox) and a celebrity's posts (from the outbox),
/// each once; resumed from a token made before the celebrity's part reported anything, it still
/// reports the celebrity's posts made meanwhile.
#[tokio::test]
async fn a_timeline_watch_reports_copies_and_celebrity_posts() {
    use mongo_social::delivery::Delivery;
    use mongo_social::inbox::InboxLifecycle;
    use mongo_social::{FanOutOnWrite, FollowGraph};
    let t = testing::test_db("watch_timeline").await;
    let graph = Arc::new(FollowGraph::new(&t.db));
    graph.set_up().await.unwrap();
    let inbox = Arc::new(FanOutOnWrite::<String>::new(&t.db));
    let delivery: Delivery<String> = Delivery::builder(&t.db, graph.clone(), inbox.clone())
        .celebrity_followers(Some(3))
        .build()
        .unwrap();
    delivery.set_up().await.unwrap();
    for user in ["star", "pal", "fan1", "fan2", "fan3"] {
        graph.add_user(user).await.unwrap();
        delivery.touch(user).await.unwrap();
    }
    for fan in ["fan1", "fan2", "fan3"] {
        graph.follow(fan, "star").await.unwrap();
    }
    graph.follow("fan1", "pal").await.unwrap();
    graph.follow("fan2", "pal").await.unwrap();
    delivery.post("star", "warm-up".to_owned()).await.unwrap(); // star becomes a celebrity
    delivery.run_pending().await.unwrap();

    // A celebrity the owner mutes is left out of the watch, as out of the timeline.
    inbox.mute("fan2", "star").await.unwrap();
    let mut muting = delivery.watch_timeline("fan2", None, options(Mode::Polling));
    delivery.post("star", "muted".to_owned()).await.unwrap();
    delivery.post("pal", "shown".to_owned()).await.unwrap();
    delivery.run_pending().await.unwrap();
    let update = next_update(Mode::Polling, &mut muting).await;
    assert_eq!(update.item.payload, "shown");
    let quiet = tokio::time::timeout(Duration::from_millis(300), muting.next()).await;
    assert!(
        quiet.is_err(),
        "nothing from the muted celebrity: {quiet:?}"
    );
    drop(muting);
    for mode in modes(
        "a_timeline_watch_reports_copies_and_celebrity_posts",
        &t,
        false,
    )
    .await
    {
        let mut updates = delivery.watch_timeline("fan1", None, options(mode));
        // A copy first, alone: its token is made before the celebrity's part reported anything.
        let first = format!("{mode:?} pal 0");
        delivery.post("pal", first.clone()).await.unwrap();
        delivery.run_pending().await.unwrap();
        let update = next_update(mode, &mut updates).await;
        assert_eq!(update.item.payload, first);
        let token = update.token;
        let mut expected = std::collections::BTreeSet::new();
        for i in 1..6 {
            let author = if i % 2 == 0 { "pal" } else { "star" };
            let text = format!("{mode:?} {author} {i}");
            delivery.post(author, text.clone()).await.unwrap();
            expected.insert(text);
        }
        delivery.run_pending().await.unwrap();
        let mut seen = std::collections::BTreeSet::new();
        while seen.len() < expected.len() {
            let update = next_update(mode, &mut updates).await;
            assert!(seen.insert(update.item.payload.clone()), "{mode:?}: twice");
        }
        assert_eq!(seen, expected);
        drop(updates);
        // From the early token: what came after it, the celebrity's posts included, once.
        let mut resumed = delivery.watch_timeline("fan1", Some(token), options(mode));
        let mut again = std::collections::BTreeSet::new();
        while again.len() < expected.len() {
            let update = next_update(mode, &mut resumed).await;
            assert!(again.insert(update.item.payload), "{mode:?}: twice");
        }
        assert_eq!(again, expected, "{mode:?}");
        let quiet = tokio::time::timeout(Duration::from_millis(300), resumed.next()).await;
        assert!(quiet.is_err(), "{mode:?}: nothing more: {quiet:?}");
    }
}
