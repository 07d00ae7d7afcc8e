//! Notification feeds against the real server: grouping, idempotence, concurrency,
//! withdrawals, seen and read state, paging, full groups, bad input and command counts.

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use futures::future::join_all;
use mongo_social::notifications::{Activity, Event, Group, Kind, NotificationStore};
use mongo_social::{error::Entity, Error, PageRequest};
use mongo_social_lab as testing;

type Store = NotificationStore<String>;

async fn store(test: &str) -> (testing::TestDb, Store) {
    let t = testing::test_db(&format!("notify_{test}")).await;
    let store = NotificationStore::new(&t.db);
    store.set_up().await.unwrap();
    (t, store)
}

fn like(recipient: &str, post: &str, actor: &str) -> Activity {
    Activity::new(recipient, Kind::Like, post, actor)
}

/// A fixed time, `minutes` after midnight UTC of a day, so events fall in known windows.
fn at(day: i64, minutes: i64) -> bson::DateTime {
    bson::DateTime::from_millis(1_764_547_200_000 + day * 86_400_000 + minutes * 60_000)
}

/// Every group of `recipient`, newest first, `limit` at a time.
async fn all_groups(store: &Store, recipient: &str, limit: usize) -> Vec<Group<String>> {
    let mut all = Vec::new();
    let mut request = PageRequest::first(limit);
    loop {
        let page = store.page(recipient, request).await.unwrap();
        assert!(page.items.len() <= limit);
        all.extend(page.items);
        match page.next {
            Some(next) => request = PageRequest::after(limit, next),
            None => return all,
        }
    }
}

/// The stored group documents of `recipient`.
async fn stored(t: &testing::TestDb, recipient: &str) -> Vec<Document> {
    use futures::TryStreamExt;
    t.collection::<Document>("notifications")
        .find(doc! { "recipient": recipient })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

#[tokio::test]
async fn events_group_by_kind_target_and_window() {
    let (_t, store) = store("grouping").await;
    for (minute, fan) in ["bob", "cat", "dan", "eve"].iter().enumerate() {
        store
            .notify(Event::new(like("ann", "p1", fan)).at(at(0, minute as i64)))
            .await
            .unwrap();
    }
    // Another target, another kind on the same target, the same kind and target a day later.
    store
        .notify(Event::new(like("ann", "p2", "bob")).at(at(0, 10)))
        .await
        .unwrap();
    store
        .notify(Event::new(Activity::new("ann", Kind::Comment, "p1", "cat")).at(at(0, 20)))
        .await
        .unwrap();
    store
        .notify(Event::new(like("ann", "p1", "fay")).at(at(1, 5)))
        .await
        .unwrap();
    // Someone else's notification, and one of the recipient's own actions: neither shows.
    store.notify(like("zed", "p9", "bob")).await.unwrap();
    store.notify(like("ann", "p1", "ann")).await.unwrap();

    let groups = all_groups(&store, "ann", 10).await;
    let summary: Vec<(Kind, &str, u64, Vec<&str>)> = groups
        .iter()
        .map(|g| {
            let actors = g.actors.iter().map(String::as_str).collect();
            (g.kind.clone(), g.target.as_str(), g.actor_count, actors)
        })
        .collect();
    assert_eq!(
        summary,
        [
            (Kind::Like, "p1", 1, vec!["fay"]),
            (Kind::Comment, "p1", 1, vec!["cat"]),
            (Kind::Like, "p2", 1, vec!["bob"]),
            // The newest three actors, newest first, and the count of all four.
            (Kind::Like, "p1", 4, vec!["eve", "dan", "cat"]),
        ]
    );
    assert_eq!(groups[0].window, at(1, 0));
    assert_eq!(groups[3].window, at(0, 0));
    assert_eq!(groups[3].updated, at(0, 3));
    assert!(groups.iter().all(|g| !g.seen && !g.read));
}

#[tokio::test]
async fn repeated_events_count_once_and_carry_the_newest_data() {
    let (t, store) = store("repeats").await;
    for text in ["first", "second"] {
        store
            .notify(Event::new(like("ann", "p1", "bob")).with_data(text.to_owned()))
            .await
            .unwrap();
    }
    store
        .notify(Event::new(like("ann", "p1", "cat")).with_data("third".to_owned()))
        .await
        .unwrap();
    store.notify(like("ann", "p1", "bob")).await.unwrap();
    let groups = all_groups(&store, "ann", 10).await;
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].actor_count, 2);
    assert_eq!(groups[0].actors, ["cat", "bob"]);
    assert_eq!(groups[0].data.as_deref(), Some("third"));
    let members = stored(&t, "ann").await[0]
        .get_array("members")
        .unwrap()
        .len();
    assert_eq!(members, 2);
}

#[tokio::test]
async fn concurrent_actors_make_one_exact_group() {
    let (t, store) = store("concurrent").await;
    let store = Arc::new(store);
    // 32 actors, each sending its event twice, all at once.
    let tasks = (0..64).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let fan = format!("fan{:02}", i % 32);
            store.notify(like("ann", "p1", &fan)).await.unwrap();
        })
    });
    for task in join_all(tasks).await {
        task.unwrap();
    }
    let documents = stored(&t, "ann").await;
    assert_eq!(documents.len(), 1, "one group");
    let members: Vec<&str> = documents[0]
        .get_array("members")
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let distinct: BTreeSet<&str> = members.iter().copied().collect();
    assert_eq!(members.len(), 32, "no duplicate actor");
    assert_eq!(distinct.len(), 32);
    assert_eq!(documents[0].get_i64("count").unwrap(), 32);
    assert_eq!(all_groups(&store, "ann", 5).await[0].actor_count, 32);
}

#[tokio::test]
async fn withdrawals_take_the_actor_and_the_count_back() {
    let (t, store) = store("withdraw").await;
    for fan in ["bob", "cat", "dan"] {
        store.notify(like("ann", "p1", fan)).await.unwrap();
    }
    store.withdraw(&like("ann", "p1", "dan")).await.unwrap();
    store.withdraw(&like("ann", "p1", "dan")).await.unwrap(); // again: nothing more
    store.withdraw(&like("ann", "p1", "zed")).await.unwrap(); // never there
    let groups = all_groups(&store, "ann", 10).await;
    assert_eq!(groups[0].actor_count, 2);
    assert_eq!(groups[0].actors, ["cat", "bob"]);
    // An actor in groups of two windows (an unlike that never reached the store in between)
    // leaves both.
    store
        .notify(Event::new(like("ann", "p1", "bob")).at(at(3, 0)))
        .await
        .unwrap();
    store.withdraw(&like("ann", "p1", "bob")).await.unwrap();
    let groups = all_groups(&store, "ann", 10).await;
    assert_eq!(groups.len(), 1, "the group left empty is gone: {groups:?}");
    assert_eq!(groups[0].actors, ["cat"]);
    store.withdraw(&like("ann", "p1", "cat")).await.unwrap();
    assert!(all_groups(&store, "ann", 10).await.is_empty());
    assert_eq!(stored(&t, "ann").await.len(), 0);
    assert_eq!(store.counts("ann").await.unwrap().unread, 0);
}

#[tokio::test]
async fn seen_and_read_state() {
    let (_t, store) = store("marks").await;
    for (minute, post) in ["p1", "p2", "p3"].iter().enumerate() {
        store
            .notify(Event::new(like("ann", post, "bob")).at(at(0, minute as i64)))
            .await
            .unwrap();
    }
    let counts = store.counts("ann").await.unwrap();
    assert_eq!((counts.unseen, counts.unread), (3, 3));
    // Seen up to what the recipient was shown: the newest group came later.
    assert_eq!(store.mark_seen("ann", Some(at(0, 1))).await.unwrap(), 2);
    let counts = store.counts("ann").await.unwrap();
    assert_eq!((counts.unseen, counts.unread), (1, 3));
    // A new actor on a seen group makes it unseen again.
    store
        .notify(Event::new(like("ann", "p1", "cat")).at(at(0, 5)))
        .await
        .unwrap();
    let counts = store.counts("ann").await.unwrap();
    assert_eq!((counts.unseen, counts.unread), (2, 3));
    let groups = all_groups(&store, "ann", 10).await;
    let p2 = groups.iter().find(|g| g.target == "p2").unwrap();
    store.mark_read("ann", &p2.id).await.unwrap();
    let counts = store.counts("ann").await.unwrap();
    assert_eq!((counts.unseen, counts.unread), (2, 2));
    // Another recipient's group, or one that does not exist: not found, nothing changed.
    for (recipient, group) in [("bob", p2.id.as_str()), ("ann", "nope")] {
        let error = store.mark_read(recipient, group).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::NotFound {
                    what: Entity::Notification,
                    ..
                }
            ),
            "{error:?}"
        );
    }
    assert_eq!(store.mark_all_read("ann", None).await.unwrap(), 2);
    assert_eq!(store.counts("ann").await.unwrap(), Default::default());
    assert!(all_groups(&store, "ann", 10)
        .await
        .iter()
        .all(|g| g.seen && g.read));
}

#[tokio::test]
async fn pages_have_no_gaps_or_repeats_and_refuse_foreign_cursors() {
    let (_t, store) = store("pages").await;
    for i in 0..25 {
        store
            .notify(Event::new(like("ann", &format!("p{i:02}"), "bob")).at(at(0, i % 7)))
            .await
            .unwrap();
    }
    let groups = all_groups(&store, "ann", 4).await;
    let targets: Vec<&str> = groups.iter().map(|g| g.target.as_str()).collect();
    let distinct: BTreeSet<&str> = targets.iter().copied().collect();
    assert_eq!((targets.len(), distinct.len()), (25, 25));
    assert!(groups
        .windows(2)
        .all(|pair| (pair[0].updated, &pair[0].id) > (pair[1].updated, &pair[1].id)));
    // A cursor of another store.
    let graph = mongo_social::FollowGraph::new(store.database());
    for user in ["x", "y", "z"] {
        graph.add_user(user).await.unwrap();
    }
    graph.follow("x", "y").await.unwrap();
    graph.follow("x", "z").await.unwrap();
    let foreign = graph
        .following("x", PageRequest::first(1))
        .await
        .unwrap()
        .next
        .unwrap();
    let error = store
        .page("ann", PageRequest::after(4, foreign))
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
        "{error:?}"
    );
    assert!(matches!(
        store.page("ann", PageRequest::first(0)).await,
        Err(Error::InvalidInput {
            reason: Invalid::PageLimit { .. },
            ..
        })
    ));
}

#[tokio::test]
async fn a_full_group_continues_in_another() {
    let t = testing::test_db("notify_full").await;
    let store: Store = NotificationStore::builder(&t.db)
        .max_actors(3)
        .build()
        .unwrap();
    for i in 0..7 {
        store
            .notify(Event::new(like("ann", "p1", &format!("fan{i}"))).at(at(0, i)))
            .await
            .unwrap();
    }
    // Repeats of actors in the first, full group and in the last one change nothing.
    for fan in ["fan0", "fan6"] {
        store
            .notify(Event::new(like("ann", "p1", fan)).at(at(0, 30)))
            .await
            .unwrap();
    }
    let groups = all_groups(&store, "ann", 10).await;
    let counts: Vec<u64> = groups.iter().map(|g| g.actor_count).collect();
    assert_eq!(counts, [1, 3, 3]);
    assert_eq!(groups[0].actors, ["fan6"]);
    let mut members = BTreeSet::new();
    for document in stored(&t, "ann").await {
        for member in document.get_array("members").unwrap() {
            assert!(members.insert(member.as_str().unwrap().to_owned()));
        }
    }
    assert_eq!(members.len(), 7);
}

#[tokio::test]
async fn bad_input_writes_nothing() {
    let (t, store) = store("bad_input").await;
    let blanks = [
        like(" ", "p1", "bob"),
        like("ann", "p1", ""),
        like("ann", "\t", "bob"),
        Activity::new("ann", Kind::Custom(" ".into()), "p1", "bob"),
    ];
    for blank in blanks {
        let error = store.notify(blank.clone()).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { .. },
                    ..
                }
            ),
            "{blank:?}: {error:?}"
        );
        let error = store.withdraw(&blank).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { .. },
                    ..
                }
            ),
            "{blank:?}: {error:?}"
        );
    }
    assert!(matches!(
        store.counts("").await,
        Err(Error::InvalidInput {
            reason: Invalid::Blank { what: "recipient" },
            ..
        })
    ));
    assert!(matches!(
        NotificationStore::<()>::builder(&t.db)
            .window(Duration::from_millis(10))
            .build(),
        Err(Error::InvalidConfig { .. })
    ));
    assert!(matches!(
        NotificationStore::<()>::builder(&t.db)
            .collection("notifications", "notification_locks")
            .build(),
        Err(Error::InvalidConfig { .. })
    ));
    assert_eq!(t.documents(&[]).await, 0);
}

#[tokio::test]
async fn trim_keeps_the_newest_groups() {
    let (_t, store) = store("trim").await;
    for i in 0..12 {
        store
            .notify(Event::new(like("ann", &format!("p{i:02}"), "bob")).at(at(0, i)))
            .await
            .unwrap();
    }
    assert_eq!(store.trim("ann", 5).await.unwrap(), 7);
    assert_eq!(store.trim("ann", 5).await.unwrap(), 0);
    let targets: Vec<String> = all_groups(&store, "ann", 10)
        .await
        .into_iter()
        .map(|g| g.target)
        .collect();
    assert_eq!(targets, ["p11", "p10", "p09", "p08", "p07"]);
    assert_eq!(store.counts("ann").await.unwrap().unread, 5);
}

#[tokio::test]
async fn command_counts() {
    let (t, store) = store("commands").await;
    let locks = if t.info.capabilities().atomic_updates {
        Vec::new()
    } else {
        vec!["insert", "delete"]
    };
    let with_locks = |work: &[&str]| -> Vec<String> {
        let mut expected: Vec<String> = locks.first().map(|l| l.to_string()).into_iter().collect();
        expected.extend(work.iter().map(|c| c.to_string()));
        expected.extend(locks.get(1).map(|l| l.to_string()));
        expected
    };
    store.notify(like("ann", "p0", "bob")).await.unwrap(); // capabilities detected
    let (_, names) = t
        .commands
        .measure(store.notify(like("ann", "p1", "bob")))
        .await;
    assert_eq!(names, with_locks(&["update"]), "a new group");
    let (_, names) = t
        .commands
        .measure(store.notify(like("ann", "p1", "cat")))
        .await;
    assert_eq!(names, with_locks(&["update"]), "a new actor");
    let (_, names) = t
        .commands
        .measure(store.notify(like("ann", "p1", "cat")))
        .await;
    assert_eq!(names, with_locks(&["update", "find"]), "a repeat");
    let (_, names) = t
        .commands
        .measure(store.withdraw(&like("ann", "p1", "cat")))
        .await;
    assert_eq!(names, with_locks(&["update", "delete"]));
    let (_, names) = t
        .commands
        .measure(store.page("ann", PageRequest::first(10)))
        .await;
    assert_eq!(names, ["find"]);
    let (_, names) = t.commands.measure(store.counts("ann")).await;
    assert_eq!(names, ["aggregate"]);
    let (_, names) = t.commands.measure(store.mark_seen("ann", None)).await;
    assert_eq!(names, ["update"]);
}

/// Events and withdrawals through a proxy that loses replies and cuts connections: every group
/// holds distinct actors and a count equal to them, and each actor's last call that succeeded
/// decides whether it is there.
#[tokio::test]
async fn notifications_survive_an_outage() {
    const ACTORS: usize = 6;
    const TARGETS: usize = 3;
    const ROUNDS: usize = 21;
    let test = testing::test_db("notify_outage").await;
    let proxy = testing::fault_proxy();
    let database = proxy.client_with(|_| {}).await.database(test.db.name());
    let store: Store = NotificationStore::builder(&database)
        .capabilities(test.info.capabilities())
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    let impatient = proxy.impatient_client().await.database(test.db.name());
    let impatient: Store = NotificationStore::builder(&impatient)
        .capabilities(test.info.capabilities())
        .retry_policy(testing::impatient_retry())
        .build()
        .unwrap();
    let (store, impatient) = (Arc::new(store), Arc::new(impatient));
    let day = at(0, 0);
    let mut tasks = Vec::new();
    for a in 0..ACTORS {
        let store = if a % 2 == 0 { &store } else { &impatient }.clone();
        tasks.push(tokio::spawn(async move {
            let actor = format!("fan{a}");
            let mut last = std::collections::BTreeMap::new();
            for round in 0..ROUNDS {
                let target = format!("p{}", (a + round) % TARGETS);
                let activity = like("ann", &target, &actor);
                let add = (round / TARGETS).is_multiple_of(2);
                let outcome = if add {
                    store.notify(Event::new(activity).at(day)).await
                } else {
                    store.withdraw(&activity).await
                };
                if let Err(error) = &outcome {
                    assert!(error.is_retryable(), "only transient failures: {error}");
                }
                // What an actor's presence must be, if its last call on the target succeeded.
                last.insert(target, outcome.is_ok().then_some(add));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (actor, last)
        }));
    }
    let outcomes = proxy.outage_during(tasks).await;
    let documents = stored(&test, "ann").await;
    for document in &documents {
        let members: Vec<&str> = document
            .get_array("members")
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap())
            .collect();
        let distinct: BTreeSet<&str> = members.iter().copied().collect();
        assert_eq!(members.len(), distinct.len(), "no actor twice: {document}");
        assert_eq!(document.get_i64("count").unwrap(), members.len() as i64);
        assert!(!members.is_empty(), "an empty group is deleted");
    }
    let mut failed = 0;
    for (actor, last) in outcomes {
        for (target, expected) in last {
            let present = documents.iter().any(|d| {
                d.get_str("target") == Ok(target.as_str())
                    && d.get_array("members")
                        .unwrap()
                        .iter()
                        .any(|m| m.as_str() == Some(actor.as_str()))
            });
            match expected {
                Some(expected) => assert_eq!(present, expected, "{actor} on {target}"),
                None => failed += 1,
            }
        }
    }
    testing::note(&format!(
        "notifications outage: {} groups, {failed} actor-target pairs ended on a failed call; \
         proxy lost {} replies",
        documents.len(),
        proxy.replies_lost()
    ));
}

#[tokio::test]
async fn the_graph_notifies_follows_and_withdraws_unfollows() {
    let (t, store) = store("graph").await;
    let store = Arc::new(store);
    let graph = mongo_social::FollowGraph::builder(&t.db)
        .notifier(store.clone())
        .build()
        .unwrap();
    for user in ["ann", "bob", "cat", "dan"] {
        graph.add_user(user).await.unwrap();
    }
    graph.add_group("g").await.unwrap();
    graph.add_member("g", "ann").await.unwrap();
    for fan in ["bob", "cat"] {
        graph.follow(fan, "ann").await.unwrap();
    }
    graph.follow("bob", "ann").await.unwrap(); // again: counted once
    graph.follow_group("dan", "g").await.unwrap(); // through a group: no notification
    let groups = all_groups(&store, "ann", 10).await;
    assert_eq!(groups.len(), 1);
    assert_eq!(
        (
            &groups[0].kind,
            groups[0].target.as_str(),
            groups[0].actor_count
        ),
        (&Kind::Follow, "ann", 2)
    );
    assert_eq!(groups[0].actors, ["cat", "bob"]);
    graph.unfollow("cat", "ann").await.unwrap();
    assert_eq!(all_groups(&store, "ann", 10).await[0].actors, ["bob"]);
    // With a notifier, a follow costs one command more (the notification's), and two in the
    // graph's database: queueing it in the outbox and completing it there.
    let (_, names) = t.commands.measure(graph.follow("dan", "ann")).await;
    let (_, plain) = {
        let graph = mongo_social::FollowGraph::new(&t.db);
        graph.unfollow("dan", "ann").await.unwrap();
        t.commands.measure(graph.follow("dan", "ann")).await
    };
    assert_eq!(
        names.len(),
        plain.len() + 3 + 2 * usize::from(!t.info.capabilities().atomic_updates)
    );
}

/// Replies notify the parent's author, in every threaded strategy; deleting a reply withdraws
/// its author.
#[tokio::test]
async fn replies_notify_the_parent_author() {
    use mongo_social::comments::{Embedded, PerComment};
    use mongo_social::{comments::Author, comments::ThreadedComments, NewComment};
    let (t, store) = store("replies").await;
    let store = Arc::new(store);
    let per_comment = PerComment::builder(&t.db)
        .notifier(store.clone())
        .build()
        .unwrap();
    let embedded = Embedded::builder(&t.db)
        .notifier(store.clone())
        .build()
        .unwrap();
    let strategies: [(&dyn ThreadedComments, &str); 2] =
        [(&per_comment, "per-comment"), (&embedded, "embedded")];
    for (comments, discussion) in strategies {
        let say = |who: &str, text: &str| NewComment::new(Author::new(who, who), text);
        comments.create_discussion(discussion).await.unwrap();
        let top = comments
            .post(discussion, say("ann", "hello"))
            .await
            .unwrap();
        let bob = comments
            .reply(discussion, &top.link, say("bob", "hi"))
            .await
            .unwrap();
        comments
            .reply(discussion, &top.link, say("bob", "again"))
            .await
            .unwrap();
        let cat = comments
            .reply(discussion, &top.link, say("cat", "yo"))
            .await
            .unwrap();
        comments
            .reply(discussion, &top.link, say("ann", "thanks"))
            .await
            .unwrap(); // her own comment: nobody notified
        comments
            .reply(discussion, &bob.link, say("cat", "bob!"))
            .await
            .unwrap();
        let target = format!("{discussion}/{}", top.link);
        let find = |groups: Vec<Group<String>>, target: &str| {
            groups.into_iter().find(|g| g.target == target)
        };
        let group = find(all_groups(&store, "ann", 10).await, &target).unwrap();
        assert_eq!(group.kind, Kind::Reply, "{discussion}");
        assert_eq!(group.actors, ["cat", "bob"], "{discussion}");
        let to_bob = find(
            all_groups(&store, "bob", 10).await,
            &format!("{discussion}/{}", bob.link),
        )
        .unwrap();
        assert_eq!(to_bob.actors, ["cat"], "{discussion}");
        comments.delete(discussion, &cat.link).await.unwrap();
        let group = find(all_groups(&store, "ann", 10).await, &target).unwrap();
        assert_eq!(group.actors, ["bob"], "{discussion}");
    }
}

/// Likes notify the post's author; 32 users liking at once make one exact group; unlikes
/// withdraw.
#[tokio::test]
async fn feed_likes_notify_the_author() {
    use mongo_social::feed::{FeedStore, NewPost, NewUser};
    let (t, store) = store("feed").await;
    let store = Arc::new(store);
    let feed: FeedStore<()> = FeedStore::builder(&t.db)
        .notifier(store.clone())
        .build()
        .unwrap();
    feed.set_up().await.unwrap();
    let users = feed.users();
    users.create(NewUser::new("ann", "ann")).await.unwrap();
    let fans: Vec<String> = (0..32).map(|i| format!("fan{i:02}")).collect();
    for fan in &fans {
        users.create(NewUser::new(fan, fan)).await.unwrap();
    }
    let post = feed
        .posts()
        .create(NewPost::new("ann", "Hello", "First post", ()))
        .await
        .unwrap();
    let likers: Vec<_> = fans
        .iter()
        .cloned()
        .map(|fan| {
            let feed = feed.clone();
            tokio::spawn(async move { feed.likes().like(post.id, &fan).await.unwrap() })
        })
        .collect();
    for liker in likers {
        assert!(liker.await.unwrap());
    }
    let likes = feed.likes();
    assert!(!likes.like(post.id, "fan00").await.unwrap(), "a repeat");
    likes.like(post.id, "ann").await.unwrap(); // her own post: nobody notified
    let groups = all_groups(&store, "ann", 10).await;
    assert_eq!(groups.len(), 1);
    assert_eq!(
        (
            &groups[0].kind,
            groups[0].target.clone(),
            groups[0].actor_count
        ),
        (&Kind::Like, post.id.to_string(), 32)
    );
    likes.unlike(post.id, "fan05").await.unwrap();
    assert_eq!(all_groups(&store, "ann", 10).await[0].actor_count, 31);
    assert_eq!(
        likes.counters(post.id).await.unwrap().likes,
        32,
        "ann's own like"
    );
}
