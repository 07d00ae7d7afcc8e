//! Sizes and ids checked up front, by every store, against the real server (issue 27): input
//! of 17 MiB is refused with [`Invalid::TooLarge`] naming what was too large, and an id of
//! 10 KB with [`Invalid::TooLong`] naming its role, before any write command is sent and with
//! the database unchanged.
//!
//! Each check seeds the store with valid data first, so an unchanged database is a real check,
//! then snapshots every collection ([`testing::TestDb::snapshot`]), runs the refused operation
//! on a fresh command count, and compares: no `insert`, `update`, `delete` or `findAndModify`
//! was sent, and no document (or collection) changed.

use mongo_social_lab::SetUp;
use std::future::Future;
use std::sync::Arc;

use bson::doc;
use mongo_social::comments::{Author, CommentStore, NewComment, ThreadedComments, Vote};
use mongo_social::delivery::Delivery;
use mongo_social::error::Invalid;
use mongo_social::feed::{FeedKind, FeedStore, Media, NewPost, NewUser};
use mongo_social::graph::FollowGraph;
use mongo_social::jobs::JobQueue;
use mongo_social::notifications::{self, Activity, Event, Kind, NotificationStore};
use mongo_social::{
    error::MAX_ID_BYTES, inbox::DynInboxLifecycle, BucketedFanOut, Embedded, Error, FanOutOnRead,
    FanOutOnWrite, HybridPages, NewMessage, PageRequest, PerComment,
};
use mongo_social_lab::{self as testing, TestDb};

/// The size of an oversized input: more than any document holds.
const HUGE: usize = 17 * 1024 * 1024;
/// The length of an overlong id.
const LONG_ID: usize = 10 * 1024;
/// The commands that write.
const WRITES: [&str; 4] = ["insert", "update", "delete", "findAndModify"];

fn huge() -> String {
    "x".repeat(HUGE)
}

fn long_id() -> String {
    "i".repeat(LONG_ID)
}

/// Runs `op`, which must fail, and checks that it sent no write command and left every
/// collection as it was; returns its error.
async fn refused<T>(
    t: &TestDb,
    label: &str,
    op: impl Future<Output = mongo_social::Result<T>>,
) -> Error {
    let before = t.snapshot(&[]).await;
    t.commands.reset();
    let error = match op.await {
        Ok(_) => panic!("{label}: accepted"),
        Err(error) => error,
    };
    let writes: Vec<String> = t
        .commands
        .names()
        .into_iter()
        .filter(|name| WRITES.contains(&name.as_str()))
        .collect();
    assert!(
        writes.is_empty(),
        "{label}: sent {writes:?} before refusing: {error}"
    );
    assert!(
        t.snapshot(&[]).await == before,
        "{label}: the database changed"
    );
    error
}

/// [`refused`], and the error is [`Invalid::TooLarge`] of `what`.
async fn too_large<T>(
    t: &TestDb,
    label: &str,
    what: &str,
    op: impl Future<Output = mongo_social::Result<T>>,
) {
    match refused(t, label, op).await {
        Error::InvalidInput {
            reason:
                Invalid::TooLarge {
                    what: found,
                    size,
                    limit,
                },
            ..
        } if found == what => assert!(size > limit, "{label}: {size} <= {limit}"),
        other => panic!("{label}: expected TooLarge of {what:?}, got {other:?}"),
    }
}

/// [`refused`], and the error is [`Invalid::TooLong`] of `what`, for an id of `bytes`.
async fn too_long_by<T>(
    t: &TestDb,
    label: &str,
    what: &str,
    bytes: usize,
    op: impl Future<Output = mongo_social::Result<T>>,
) {
    match refused(t, label, op).await {
        Error::InvalidInput {
            reason:
                Invalid::TooLong {
                    what: found,
                    bytes: found_bytes,
                    max,
                },
            ..
        } if found == what => {
            assert_eq!((found_bytes, max), (bytes, MAX_ID_BYTES), "{label}");
        }
        other => panic!(
            "{label}: expected TooLong of {what:?}, got {}",
            short(&other)
        ),
    }
}

/// [`too_long_by`] for an id of [`LONG_ID`] bytes.
async fn too_long<T>(
    t: &TestDb,
    label: &str,
    what: &str,
    op: impl Future<Output = mongo_social::Result<T>>,
) {
    too_long_by(t, label, what, LONG_ID, op).await
}

/// An error's message, cut short (one naming a 10 KB id is long).
fn short(error: &Error) -> String {
    let text = format!("{error:?}");
    text.chars().take(300).collect()
}

// ---------------------------------------------------------------------------------------------
// Inboxes

/// A message of `payload` from `from` to `to`.
fn message(from: &str, to: &[&str], payload: String) -> NewMessage<String> {
    NewMessage::new(from, to.iter().map(|to| to.to_string()), payload)
}

/// Every size and id check of an inbox strategy. `list_what` is what a recipient list too long
/// for one document is called: the message itself where the list stays in it
/// ([`FanOutOnRead`]), the shared `"recipient list"` elsewhere.
async fn inbox_limits(t: &TestDb, store: Arc<DynInboxLifecycle<String>>, list_what: &str) {
    store.set_up().await.unwrap();
    let sent = store
        .send(message("ann", &["bob"], "hello".to_owned()))
        .await
        .unwrap()
        .into_message();

    // (a) Sizes.
    too_large(t, "send, 17 MiB payload", "message", async {
        store.send(message("ann", &["bob", "cat"], huge())).await
    })
    .await;
    let mut big = sent.clone();
    big.payload = huge();
    too_large(t, "deliver, 17 MiB payload", "message", async {
        store.deliver(&big, &["cat".to_owned()]).await
    })
    .await;
    // 17 MiB of recipients: 34,000 ids of 512 bytes.
    let crowd: Vec<String> = (0..HUGE / MAX_ID_BYTES)
        .map(|i| format!("{i:0>512}"))
        .collect();
    too_large(t, "send, 17 MiB of recipients", list_what, async {
        store
            .send(NewMessage::new("ann", crowd.clone(), "hi".to_owned()))
            .await
    })
    .await;
    too_large(t, "edit, 17 MiB payload", "message", async {
        store.edit("ann", sent.id, huge()).await
    })
    .await;

    // (b) Ids.
    let long = long_id();
    too_long(t, "send, long sender", "sender", async {
        store.send(message(&long, &["bob"], "hi".to_owned())).await
    })
    .await;
    too_long(t, "send, long recipient", "recipient", async {
        store
            .send(message("ann", &["bob", &long], "hi".to_owned()))
            .await
    })
    .await;
    too_long(t, "deliver, long recipient", "recipient", async {
        store.deliver(&sent, std::slice::from_ref(&long)).await
    })
    .await;
    too_long(t, "inbox page, long owner", "owner", async {
        store.inbox_page(&long, PageRequest::first(10)).await
    })
    .await;
    too_long(t, "count, long owner", "owner", store.count(&long)).await;
    too_long(
        t,
        "mark read, long owner",
        "owner",
        store.mark_read(&long, sent.id),
    )
    .await;
    too_long(t, "mute, long owner", "owner", store.mute(&long, "ann")).await;
    too_long(t, "block, long sender", "sender", store.block("bob", &long)).await;
    too_long(t, "edit, long sender", "sender", async {
        store.edit(&long, sent.id, "new".to_owned()).await
    })
    .await;
    too_long(
        t,
        "retract, long sender",
        "sender",
        store.retract(&long, sent.id),
    )
    .await;
    too_long(
        t,
        "remove from, long owner",
        "owner",
        store.remove_from(&long, "ann"),
    )
    .await;
    too_long(
        t,
        "remove from, long sender",
        "sender",
        store.remove_from("bob", &long),
    )
    .await;
    too_long(t, "prune, long owner", "owner", store.prune(&long)).await;
}

#[tokio::test]
async fn fan_out_on_read_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_fan_out_on_read").await;
    let store = Arc::new(FanOutOnRead::<String>::new(&t.db));
    inbox_limits(&t, store, "message").await;
}

#[tokio::test]
async fn fan_out_on_write_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_fan_out_on_write").await;
    let store = Arc::new(FanOutOnWrite::<String>::new(&t.db));
    inbox_limits(&t, store, "recipient list").await;
}

#[tokio::test]
async fn bucketed_fan_out_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_bucketed").await;
    let store = Arc::new(BucketedFanOut::<String>::new(&t.db));
    inbox_limits(&t, store, "recipient list").await;
}

// ---------------------------------------------------------------------------------------------
// Comments

fn comment(author: &str, text: impl Into<String>) -> NewComment {
    NewComment::new(Author::new(author, "Ann"), text)
}

/// Every size and id check of a comment strategy (`threaded` for its replies).
async fn comment_limits(
    t: &TestDb,
    store: &dyn CommentStore,
    threaded: Option<&dyn ThreadedComments>,
) {
    store.set_up().await.unwrap();
    store.create_discussion("d1").await.unwrap();
    let posted = store.post("d1", comment("ann", "first")).await.unwrap();

    // (a) Sizes.
    too_large(t, "post, 17 MiB text", "comment", async {
        store.post("d1", comment("ann", huge())).await
    })
    .await;
    too_large(t, "post, 17 MiB author name", "comment", async {
        let author = Author::new("ann", huge());
        store.post("d1", NewComment::new(author, "hi")).await
    })
    .await;
    too_large(t, "edit, 17 MiB text", "comment", async {
        store.edit("d1", &posted.link, &huge()).await
    })
    .await;
    if let Some(threaded) = threaded {
        too_large(t, "reply, 17 MiB text", "comment", async {
            threaded
                .reply("d1", &posted.link, comment("bob", huge()))
                .await
        })
        .await;
    }

    // (b) Ids: the discussion id is checked before anything else, a thread's depth included.
    let long = long_id();
    too_long(t, "create discussion, long id", "discussion id", async {
        store.create_discussion(&long).await
    })
    .await;
    too_long(t, "post, long discussion id", "discussion id", async {
        store.post(&long, comment("ann", "hi")).await
    })
    .await;
    too_long(
        t,
        "post, long discussion id and 17 MiB",
        "discussion id",
        async { store.post(&long, comment("ann", huge())).await },
    )
    .await;
    too_long(t, "post, long author", "author", async {
        store.post("d1", comment(&long, "hi")).await
    })
    .await;
    too_long(t, "edit, long discussion id", "discussion id", async {
        store.edit(&long, &posted.link, "new").await
    })
    .await;
    too_long(t, "delete, long discussion id", "discussion id", async {
        store.delete(&long, &posted.link).await
    })
    .await;
    too_long(t, "get, long discussion id", "discussion id", async {
        store.get(&long, &posted.link).await
    })
    .await;
    too_long(t, "vote, long discussion id", "discussion id", async {
        store.vote(&long, &posted.link, "bob", Vote::Up).await
    })
    .await;
    too_long(t, "vote, long user", "user", async {
        store.vote("d1", &posted.link, &long, Vote::Up).await
    })
    .await;
    if let Some(threaded) = threaded {
        too_long(t, "reply, long discussion id", "discussion id", async {
            threaded
                .reply(&long, &posted.link, comment("bob", "hi"))
                .await
        })
        .await;
        too_long(t, "reply, long author", "author", async {
            threaded
                .reply("d1", &posted.link, comment(&long, "hi"))
                .await
        })
        .await;
    }
}

#[tokio::test]
async fn per_comment_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_per_comment").await;
    let store = PerComment::new(&t.db);
    comment_limits(&t, &store, Some(&store)).await;
}

#[tokio::test]
async fn embedded_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_embedded").await;
    let store = Embedded::new(&t.db);
    comment_limits(&t, &store, Some(&store)).await;
}

#[tokio::test]
async fn hybrid_pages_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_hybrid").await;
    let store = HybridPages::new(&t.db);
    comment_limits(&t, &store, None).await;
}

/// A reply whose notification target (`"<discussion>/<parent link>"`) would be longer than an id
/// may be is refused before it is stored, not stored and then refused by the notifier.
#[tokio::test]
async fn a_reply_the_notifier_would_refuse_is_refused_first() {
    let t = testing::test_db("limits_reply_target").await;
    let notifier = Arc::new(NotificationStore::<()>::new(&t.db));
    // Their collections differ (`comments` and `comment_discussions`, `discussions`) but for
    // votes and locks, which these replies do not reach.
    let per_comment = PerComment::builder(&t.db)
        .notifier(notifier.clone())
        .build()
        .unwrap();
    let embedded = Embedded::builder(&t.db).notifier(notifier).build().unwrap();
    // The longest discussion id there may be: valid itself, too long with a link after it.
    let discussion = "d".repeat(MAX_ID_BYTES);
    for store in [&per_comment as &dyn ThreadedComments, &embedded] {
        store.set_up().await.unwrap();
        store.create_discussion(&discussion).await.unwrap();
        let parent = store
            .post(&discussion, comment("ann", "first"))
            .await
            .unwrap();
        let label = format!("{:?} reply", store.strategy());
        let target = MAX_ID_BYTES + 1 + parent.link.len();
        too_long_by(&t, &label, "notification target", target, async {
            store
                .reply(&discussion, &parent.link, comment("bob", "hi"))
                .await
        })
        .await;
    }
}

// ---------------------------------------------------------------------------------------------
// The follow graph: it stores ids only (users, groups), so a 17 MiB name is an id too long.

#[tokio::test]
async fn follow_graph_checks_ids_first() {
    let t = testing::test_db("limits_graph").await;
    let graph = FollowGraph::new(&t.db);
    graph.set_up().await.unwrap();
    for user in ["ann", "bob"] {
        graph.add_user(user).await.unwrap();
    }
    graph.add_group("g1").await.unwrap();
    graph.follow("ann", "bob").await.unwrap();

    let huge_group = huge();
    too_long_by(&t, "add group, 17 MiB name", "group id", HUGE, async {
        graph.add_group(&huge_group).await
    })
    .await;
    let long = long_id();
    too_long(&t, "add user, long id", "user", graph.add_user(&long)).await;
    too_long(&t, "add group, long id", "group id", graph.add_group(&long)).await;
    too_long(
        &t,
        "follow, long owner",
        "owner",
        graph.follow(&long, "bob"),
    )
    .await;
    too_long(&t, "follow, long user", "user", graph.follow("ann", &long)).await;
    too_long(
        &t,
        "unfollow, long user",
        "user",
        graph.unfollow("ann", &long),
    )
    .await;
    too_long(
        &t,
        "follow group, long owner",
        "owner",
        graph.follow_group(&long, "g1"),
    )
    .await;
    too_long(&t, "follow group, long group", "group id", async {
        graph.follow_group("ann", &long).await
    })
    .await;
    too_long(
        &t,
        "add member, long group",
        "group id",
        graph.add_member(&long, "bob"),
    )
    .await;
    too_long(
        &t,
        "add member, long user",
        "user",
        graph.add_member("g1", &long),
    )
    .await;
    too_long(&t, "block, long owner", "owner", graph.block(&long, "bob")).await;
    too_long(
        &t,
        "dismiss, long user",
        "user",
        graph.dismiss("ann", &long),
    )
    .await;
    too_long(&t, "stats, long user", "user", graph.stats(&long)).await;
    too_long(&t, "members, long group", "group id", async {
        graph.members(&long, PageRequest::first(10)).await
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The feed: posts, users, feeds, likes.

#[tokio::test]
async fn feed_store_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_feed").await;
    let store: FeedStore<()> = FeedStore::builder(&t.db)
        .capabilities(t.info.capabilities())
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    store
        .users()
        .create(NewUser::new("ann", "ann"))
        .await
        .unwrap();
    let post = store
        .posts()
        .create(NewPost::new("ann", "Hello", "First post", ()))
        .await
        .unwrap();

    // (a) Sizes.
    too_large(&t, "post, 17 MiB body", "post", async {
        store
            .posts()
            .create(NewPost::new("ann", "Big", huge(), ()))
            .await
    })
    .await;
    too_large(&t, "post, 17 MiB media url", "post", async {
        let post = NewPost::new("ann", "Big", "", ()).image(Media::new(huge(), "a picture"));
        store.posts().create(post).await
    })
    .await;
    too_large(&t, "user, 17 MiB display name", "user", async {
        let mut user = NewUser::new("bob", "bob");
        user.display_name = huge();
        store.users().create(user).await
    })
    .await;
    too_large(&t, "extended user, 17 MiB", "extended user", async {
        store
            .users()
            .put_extended("ann", &doc! { "bio": huge() })
            .await
    })
    .await;

    // (b) Ids.
    let long = long_id();
    too_long(&t, "post, long author", "author", async {
        store
            .posts()
            .create(NewPost::new(&long, "Hi", "", ()))
            .await
    })
    .await;
    too_long(&t, "user, long id", "user", async {
        store.users().create(NewUser::new(&long, "bob")).await
    })
    .await;
    too_long(&t, "user, long username", "username", async {
        store.users().create(NewUser::new("bob", &long)).await
    })
    .await;
    too_long(&t, "rename, long username", "username", async {
        store.users().rename("ann", &long).await
    })
    .await;
    too_long(&t, "rename, long user", "user", async {
        store.users().rename(&long, "ann2").await
    })
    .await;
    too_long(&t, "extended user, long user", "user", async {
        store
            .users()
            .put_extended(&long, &doc! { "bio": "hi" })
            .await
    })
    .await;
    too_long(
        &t,
        "like, long user",
        "user",
        store.likes().like(post.id, &long),
    )
    .await;
    too_long(
        &t,
        "unlike, long user",
        "user",
        store.likes().unlike(post.id, &long),
    )
    .await;
    let feed = FeedKind::User(long.clone());
    too_long(&t, "feed page, long user", "user", async {
        store.feeds().page(&feed, PageRequest::first(10)).await
    })
    .await;
    too_long(
        &t,
        "feed items, long user",
        "user",
        store.feeds().items(&feed),
    )
    .await;
    too_long(&t, "rebuild feed, long user", "user", async {
        store.feeds().rebuild_user(&long).await
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Notifications

#[tokio::test]
async fn notification_store_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_notifications").await;
    let store: NotificationStore<String> = NotificationStore::new(&t.db);
    store.set_up().await.unwrap();
    let like = |recipient: &str, target: &str, actor: &str| {
        Activity::new(recipient, Kind::Like, target, actor)
    };
    store
        .notify(Event::new(like("ann", "p1", "bob")).with_data("a post".to_owned()))
        .await
        .unwrap();

    // (a) Sizes: the data, and a target of 17 MiB (an id, so too long).
    too_large(&t, "notify, 17 MiB data", "notification data", async {
        store
            .notify(Event::new(like("ann", "p1", "cat")).with_data(huge()))
            .await
    })
    .await;
    let just_over = "x".repeat(notifications::MAX_DATA_BYTES);
    too_large(
        &t,
        "notify, data just over the limit",
        "notification data",
        async {
            store
                .notify(Event::new(like("ann", "p1", "cat")).with_data(just_over))
                .await
        },
    )
    .await;
    too_large(
        &t,
        "notify yourself, 17 MiB data",
        "notification data",
        async {
            store
                .notify(Event::new(like("ann", "p1", "ann")).with_data(huge()))
                .await
        },
    )
    .await;
    let huge_target = huge();
    too_long_by(&t, "notify, 17 MiB target", "target", HUGE, async {
        store.notify(like("ann", &huge_target, "cat")).await
    })
    .await;

    // (b) Ids.
    let long = long_id();
    too_long(&t, "notify, long recipient", "recipient", async {
        store.notify(like(&long, "p1", "cat")).await
    })
    .await;
    too_long(&t, "notify, long actor", "actor", async {
        store.notify(like("ann", "p1", &long)).await
    })
    .await;
    too_long(&t, "notify, long target", "target", async {
        store.notify(like("ann", &long, "cat")).await
    })
    .await;
    too_long(&t, "notify, long kind", "kind", async {
        let activity = Activity::new("ann", Kind::Custom(long.clone()), "p1", "cat");
        store.notify(activity).await
    })
    .await;
    too_long(&t, "withdraw, long target", "target", async {
        store.withdraw(&like("ann", &long, "bob")).await
    })
    .await;
    too_long(&t, "page, long recipient", "recipient", async {
        store.page(&long, PageRequest::first(10)).await
    })
    .await;
    too_long(&t, "mark all read, long recipient", "recipient", async {
        store.mark_all_read(&long, None).await
    })
    .await;
    too_long(
        &t,
        "trim, long recipient",
        "recipient",
        store.trim(&long, 1),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Jobs

#[tokio::test]
async fn job_queue_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_jobs").await;
    let queue = JobQueue::new(&t.db);
    queue.set_up().await.unwrap();
    queue.enqueue("greet", doc! { "who": "bob" }).await.unwrap();

    too_large(&t, "enqueue, 17 MiB payload", "job payload", async {
        queue.enqueue("greet", doc! { "who": huge() }).await
    })
    .await;
    too_large(&t, "enqueue once, 17 MiB payload", "job payload", async {
        let id = bson::oid::ObjectId::new();
        queue
            .enqueue_once(id, "greet", doc! { "who": huge() })
            .await
    })
    .await;
    let long = long_id();
    too_long(&t, "enqueue, long kind", "job kind", async {
        queue.enqueue(&long, doc! { "who": "bob" }).await
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Delivery

#[tokio::test]
async fn delivery_checks_sizes_and_ids_first() {
    let t = testing::test_db("limits_delivery").await;
    let graph = Arc::new(FollowGraph::new(&t.db));
    graph.set_up().await.unwrap();
    let inbox = Arc::new(FanOutOnWrite::<String>::new(&t.db));
    let delivery = Delivery::builder(&t.db, graph.clone(), inbox)
        .build()
        .unwrap();
    delivery.set_up().await.unwrap();
    for user in ["ann", "bob"] {
        graph.add_user(user).await.unwrap();
    }
    delivery.follow("bob", "ann").await.unwrap();
    delivery.post("ann", "hello".to_owned()).await.unwrap();

    too_large(&t, "post, 17 MiB payload", "message", async {
        delivery.post("ann", huge()).await
    })
    .await;
    let long = long_id();
    too_long(&t, "post, long author", "sender", async {
        delivery.post(&long, "hi".to_owned()).await
    })
    .await;
    too_long(
        &t,
        "follow, long owner",
        "owner",
        delivery.follow(&long, "ann"),
    )
    .await;
    too_long(
        &t,
        "unfollow, long user",
        "user",
        delivery.unfollow("bob", &long),
    )
    .await;
    too_long(&t, "touch, long user", "user", delivery.touch(&long)).await;
    too_long(&t, "timeline, long owner", "owner", async {
        delivery.timeline(&long, PageRequest::first(10)).await
    })
    .await;
}
