//! The social feed against the real server (`MONGODB_URI`, or the fixture's FerretDB).

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongo_social::feed::{
    Candidate, Clock, Counter, DefaultRanking, FeedKind, FeedStore, FeedStoreBuilder, Media,
    NewPost, NewUser, Ranking, SearchOrder,
};
use mongo_social::graph::FollowList;
use mongo_social::jobs::{Job, JobHandler, JobQueue};
use mongo_social::{error::Entity, feed::Post, feed::PostId, Cursor, Error, PageRequest};
use mongo_social_lab::{self as testing, TestDb};
use serde::{Deserialize, Serialize};

const HOUR_MS: i64 = 60 * 60 * 1000;

/// The application's extension of a post in these tests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Extra {
    tags: Vec<String>,
    mood: Option<String>,
}

type Store = FeedStore<Extra>;

async fn store_with(
    test: &str,
    configure: impl FnOnce(FeedStoreBuilder<Extra>) -> FeedStoreBuilder<Extra>,
) -> (TestDb, Store) {
    let t = testing::test_db(test).await;
    let store = configure(FeedStore::builder(&t.db).capabilities(t.info.capabilities()))
        .build()
        .expect("build store");
    store.set_up().await.expect("create indexes");
    t.commands.reset();
    (t, store)
}

async fn users(store: &Store, ids: &[&str]) {
    for id in ids {
        store.users().create(NewUser::new(*id, *id)).await.unwrap();
    }
}

async fn post(store: &Store, author: &str, title: &str, body: &str) -> Post<Extra> {
    store
        .posts()
        .create(NewPost::new(author, title, body, Extra::default()))
        .await
        .unwrap()
}

fn ids(posts: &[Post<Extra>]) -> Vec<PostId> {
    posts.iter().map(|post| post.id).collect()
}

/// Every post of a feed, `page_size` at a time, following the cursor.
async fn read_feed(store: &Store, feed: &FeedKind, page_size: usize) -> Vec<PostId> {
    let mut all = Vec::new();
    let mut request = PageRequest::first(page_size);
    loop {
        let page = store.feeds().page(feed, request).await.unwrap();
        assert!(page.items.len() <= page_size);
        all.extend(ids(&page.items));
        match page.next {
            Some(cursor) => request = PageRequest::after(page_size, cursor),
            None => return all,
        }
    }
}

async fn count(t: &TestDb, collection: &str) -> u64 {
    t.collection::<Document>(collection)
        .count_documents(doc! {})
        .await
        .unwrap()
}

/// A clock the test moves by hand.
#[derive(Debug)]
struct TestClock(AtomicI64);

impl TestClock {
    fn set(&self, millis: i64) {
        self.0.store(millis, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> bson::DateTime {
        bson::DateTime::from_millis(self.0.load(Ordering::SeqCst))
    }
}

#[tokio::test]
async fn post_round_trip_with_media_and_extension() {
    let (t, store) = store_with("feed_post_round_trip", |b| b).await;
    users(&store, &["ann"]).await;
    let new = NewPost::new(
        "ann",
        "Coast trip",
        "Photos, a clip and the sea",
        Extra {
            tags: vec!["travel".into(), "sea".into()],
            mood: Some("happy".into()),
        },
    )
    .image(Media::new("https://img.example/1.png", "Beach"))
    .image(Media::new("https://img.example/2.png", "Dunes"))
    .video(Media::new("https://vid.example/1.mp4", "Waves"))
    .audio(Media::new("https://aud.example/1.mp3", "Gulls"));
    let (created, commands) = t.commands.measure(store.posts().create(new.clone())).await;
    let created = created.unwrap();
    assert_eq!(commands, ["find", "insert", "insert"], "user, post, job");
    assert_eq!(created.created_by.username, "ann");

    let (read, commands) = t.commands.measure(store.posts().get(created.id)).await;
    let read = read.unwrap();
    assert_eq!(commands, ["find"], "a post is one query");
    assert_eq!(read, created);
    assert_eq!(read.images, new.images);
    assert_eq!(read.videos, new.videos);
    assert_eq!(read.audio, new.audio);
    assert_eq!(read.extension, new.extension);
    assert_eq!(
        (read.title.as_str(), read.body.as_str()),
        ("Coast trip", "Photos, a clip and the sea")
    );

    // The ladder's other rungs: the hot profile and the rarely read rest.
    let user = store.users().get("ann").await.unwrap();
    assert_eq!(user.chunk(), read.created_by);
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Details {
        email: String,
        birthday: String,
    }
    let details = Details {
        email: "ann@example.com".into(),
        birthday: "1983-05-07".into(),
    };
    store.users().put_extended("ann", &details).await.unwrap();
    let extended = store.users().get_extended::<Details>("ann").await.unwrap();
    assert_eq!((extended.id.as_str(), &extended.details), ("ann", &details));
    assert!(matches!(
        store.users().put_extended("ghost", &details).await,
        Err(Error::NotFound {
            what: Entity::User,
            ..
        })
    ));
    users(&store, &["bob"]).await;
    assert!(matches!(
        store.users().get_extended::<Details>("bob").await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(count(&t, "extended_users").await, 1);
}

#[tokio::test]
async fn rename_reaches_every_copy_after_an_interrupted_propagation() {
    let (t, store) = store_with("feed_rename_propagation", |b| {
        b.propagation_batch(4).chunk_target("comments", "author")
    })
    .await;
    users(&store, &["ann", "bob"]).await;
    for i in 0..18 {
        post(&store, "ann", &format!("post {i}"), "text").await;
    }
    post(&store, "bob", "bob's", "text").await;
    // Another module's documents embedding ann's chunk (without a revision).
    let comments = t.collection::<Document>("comments");
    let chunk = doc! { "id": "ann", "username": "ann" };
    comments
        .insert_many((0..6).map(|i| doc! { "n": i, "author": chunk.clone() }))
        .await
        .unwrap();
    comments
        .create_index(
            mongodb::IndexModel::builder()
                .keys(doc! { "author.id": 1, "_id": 1 })
                .build(),
        )
        .await
        .unwrap();
    let posts = t.collection::<Document>("posts");
    let named = |name: &'static str| {
        let posts = posts.clone();
        async move {
            posts
                .count_documents(doc! { "created_by.username": name })
                .await
                .unwrap()
        }
    };

    // Interrupted after 2 batches of 4: some copies are new, the rest still old.
    let first = store
        .users()
        .rename_in_background("ann", "annie")
        .await
        .unwrap();
    let status = store.users().run_propagation(first, Some(2)).await.unwrap();
    assert!(!status.done);
    assert_eq!((status.batches, status.updated), (2, 8));
    assert_eq!(named("annie").await, 8);
    assert_eq!(named("ann").await, 10);
    assert_eq!(
        store.users().unfinished_propagations().await.unwrap(),
        [first]
    );
    assert_eq!(store.users().get("ann").await.unwrap().username, "annie");

    // Resumed: every copy, in posts and comments, has the new name; bob's post is untouched.
    assert_eq!(store.users().resume_propagations().await.unwrap(), 1);
    assert_eq!(named("annie").await, 18);
    assert_eq!(named("ann").await, 0);
    assert_eq!(named("bob").await, 1);
    assert_eq!(
        comments
            .count_documents(doc! { "author.username": "annie" })
            .await
            .unwrap(),
        6
    );
    assert!(store
        .users()
        .unfinished_propagations()
        .await
        .unwrap()
        .is_empty());

    // Idempotent: running again rewrites nothing.
    let again = store.users().propagate("ann").await.unwrap();
    assert!(again.done);
    assert_eq!(again.updated, 0);

    // Two renames whose runs finish in the wrong order still end with the newest name.
    let stale = store
        .users()
        .rename_in_background("ann", "ann2")
        .await
        .unwrap();
    let status = store.users().run_propagation(stale, Some(1)).await.unwrap();
    assert!(!status.done);
    assert!(store.users().rename("ann", "ann3").await.unwrap().done);
    assert!(
        store
            .users()
            .run_propagation(stale, None)
            .await
            .unwrap()
            .done
    );
    assert_eq!(named("ann3").await, 18);
    let post = store
        .posts()
        .get(PostId(
            posts
                .find_one(doc! { "created_by.id": "ann" })
                .await
                .unwrap()
                .unwrap()
                .get_object_id("_id")
                .unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(post.created_by.revision, 3);
    // The background job left by `rename_user_in_background` finds its work done.
    store.run_pending().await.unwrap();
    assert_eq!(named("ann3").await, 18);
    assert_eq!(count(&t, "feed_jobs").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn likes_are_exact_under_concurrency() {
    let (t, store) = store_with("feed_likes_concurrent", |b| b).await;
    let names: Vec<String> = (0..20).map(|i| format!("u{i:02}")).collect();
    for name in &names {
        store
            .users()
            .create(NewUser::new(name, name))
            .await
            .unwrap();
    }
    users(&store, &["ann"]).await;
    let target = post(&store, "ann", "Like me", "please").await.id;

    // Each user likes (twice, concurrently) then unlikes (twice) in three rounds; even users keep
    // their like at the end of each round.
    for round in 0..3 {
        let mut tasks = Vec::new();
        for name in &names {
            for _ in 0..2 {
                let (store, name) = (store.clone(), name.clone());
                tasks.push(tokio::spawn(async move {
                    store.likes().like(target, &name).await
                }));
            }
        }
        let mut liked = 0;
        for task in tasks {
            liked += usize::from(task.await.unwrap().unwrap());
        }
        // Even users still like the post from the round before.
        let expected = if round == 0 { 20 } else { 10 };
        assert_eq!(
            liked, expected,
            "round {round}: each user's like counts once"
        );
        assert_eq!(store.likes().counters(target).await.unwrap().likes, 20);

        let mut tasks = Vec::new();
        for (i, name) in names
            .iter()
            .cloned()
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
        {
            for _ in 0..2 {
                let (store, name) = (store.clone(), name.clone());
                tasks.push(tokio::spawn(async move {
                    (i, store.likes().unlike(target, &name).await)
                }));
            }
        }
        let mut unliked = 0;
        for task in tasks {
            unliked += usize::from(task.await.unwrap().1.unwrap());
        }
        assert_eq!(unliked, 10, "round {round}: each unlike counts once");
        assert_eq!(store.likes().counters(target).await.unwrap().likes, 10);
    }
    assert_eq!(count(&t, "post_likes").await, 10);
    assert!(store.likes().is_liked(target, "u00").await.unwrap());
    assert!(!store.likes().is_liked(target, "u01").await.unwrap());
    assert_eq!(store.likes().recount(target).await.unwrap(), 10);

    store
        .likes()
        .add_to_counter(target, Counter::Comments, 2)
        .await
        .unwrap();
    store
        .likes()
        .add_to_counter(target, Counter::Points, 15)
        .await
        .unwrap();
    let counters = store.likes().counters(target).await.unwrap();
    assert_eq!(
        (counters.likes, counters.comments, counters.points),
        (10, 2, 15)
    );

    // Commands of one like and of a repeated like.
    let (liked, commands) = t.commands.measure(store.likes().like(target, "u01")).await;
    assert!(liked.unwrap());
    let locked = !t.info.capabilities().atomic_updates;
    // The like is stored marked "not yet counted", counted, then unmarked: the mark lets a like
    // or unlike that finds it after a failure finish the count exactly once.
    let expected: &[&str] = if locked {
        &[
            "find", "find", "insert", "insert", "update", "update", "delete",
        ]
    } else {
        &["find", "find", "insert", "update", "update"]
    };
    assert_eq!(
        commands, expected,
        "post, user, (lock), like, $inc, unmark, (unlock)"
    );
    let (liked, commands) = t.commands.measure(store.likes().like(target, "u01")).await;
    assert!(!liked.unwrap());
    // The refused insert is followed by a read of the stored like, to finish it if a failure
    // interrupted it.
    let expected: &[&str] = if locked {
        &["find", "find", "insert", "insert", "find", "delete"]
    } else {
        &["find", "find", "insert", "find"]
    };
    assert_eq!(commands, expected, "a repeated like counts nothing");
    let (unliked, commands) = t
        .commands
        .measure(store.likes().unlike(target, "u01"))
        .await;
    assert!(unliked.unwrap());
    let expected: &[&str] = if locked {
        &[
            "find",
            "find",
            "insert",
            "findAndModify",
            "update",
            "delete",
            "delete",
        ]
    } else {
        &["find", "find", "findAndModify", "update", "delete"]
    };
    assert_eq!(
        commands, expected,
        "post, user, (lock), mark removing, $inc, delete, (unlock)"
    );
}

#[tokio::test]
async fn feed_pages_are_ordered_bounded_and_complete() {
    let (t, store) = store_with("feed_pages", |b| b.max_feed_len(20)).await;
    users(&store, &["ann", "bob"]).await;
    let mut created = Vec::new();
    for i in 0..23 {
        let author = if i % 3 == 0 { "bob" } else { "ann" };
        created.push(post(&store, author, &format!("post {i}"), "text").await.id);
    }
    assert_eq!(store.run_pending().await.unwrap(), 23);
    let newest_first: Vec<PostId> = created.iter().rev().copied().collect();

    let latest = FeedKind::Latest;
    for page_size in [1, 3, 7, 20, 50] {
        assert_eq!(
            read_feed(&store, &latest, page_size).await,
            newest_first[..20],
            "page size {page_size}: the 20 newest, newest first, no gaps or repeats"
        );
    }
    let first = store
        .feeds()
        .page(&latest, PageRequest::first(5))
        .await
        .unwrap();
    let (page, commands) = t
        .commands
        .measure(
            store
                .feeds()
                .page(&latest, PageRequest::after(5, first.next.unwrap())),
        )
        .await;
    assert_eq!(ids(&page.unwrap().items), newest_first[5..10]);
    assert_eq!(
        commands,
        ["find", "find"],
        "the feed, then its posts with one $in"
    );

    // A post arriving while paging does not shift the pages after the cursor.
    let first = store
        .feeds()
        .page(&latest, PageRequest::first(4))
        .await
        .unwrap();
    let newer = post(&store, "ann", "late", "text").await.id;
    store.run_pending().await.unwrap();
    let second = store
        .feeds()
        .page(&latest, PageRequest::after(4, first.next.unwrap()))
        .await
        .unwrap();
    assert_eq!(ids(&second.items), newest_first[4..8]);
    assert_eq!(read_feed(&store, &latest, 6).await[0], newer);

    // A user without a feed yet: an empty page, no cursor; the user is looked up.
    users(&store, &["cat"]).await;
    let (empty, commands) = t
        .commands
        .measure(
            store
                .feeds()
                .page(&FeedKind::User("cat".into()), PageRequest::first(5)),
        )
        .await;
    let empty = empty.unwrap();
    assert!(empty.items.is_empty() && empty.next.is_none());
    assert_eq!(commands, ["find", "find"], "the feed, then the user");
}

#[tokio::test]
async fn hot_feed_counts_only_the_window() {
    let clock = Arc::new(TestClock(AtomicI64::new(0)));
    let start = bson::DateTime::now().timestamp_millis() - 30 * HOUR_MS;
    clock.set(start);
    let (t, store) = store_with("feed_hot_window", |b| b.clock(clock.clone())).await;
    let likers: Vec<String> = (0..5).map(|i| format!("fan{i}")).collect();
    for name in &likers {
        store
            .users()
            .create(NewUser::new(name, name))
            .await
            .unwrap();
    }
    users(&store, &["ann"]).await;
    let like = |post: PostId, range: std::ops::Range<usize>| {
        let (store, likers) = (store.clone(), likers.clone());
        async move {
            for name in &likers[range] {
                assert!(store.likes().like(post, name).await.unwrap());
            }
        }
    };

    // T0: post A, liked 4 times.
    let a = post(&store, "ann", "A", "old").await.id;
    like(a, 0..4).await;
    // T0+20h: post B liked twice, post C never, post D once, A once more.
    clock.set(start + 20 * HOUR_MS);
    let b = post(&store, "ann", "B", "new").await.id;
    let _c = post(&store, "ann", "C", "unliked").await.id;
    let d = post(&store, "ann", "D", "old likes").await.id;
    like(b, 0..2).await;
    like(d, 0..1).await;
    like(a, 4..5).await;
    // Backdated data: three likes of D stamped T0.
    let old_likes = (0..3).map(|i| {
        let user = format!("old{i}");
        doc! { "_id": { "post": d.0, "user": &user }, "post": d.0, "user": &user,
        "at": bson::DateTime::from_millis(start),
        "created": bson::DateTime::from_millis(start + 20 * HOUR_MS) }
    });
    t.collection::<Document>("post_likes")
        .insert_many(old_likes)
        .await
        .unwrap();

    // At T0+20h everything is in the window: A 5, D 4, B 2; C has no likes.
    store.feeds().refresh_hot().await.unwrap();
    let hot = read_feed(&store, &FeedKind::Hot, 2).await;
    assert_eq!(hot, [a, d, b]);

    // A refresh recomputes scores: a cursor from before it is refused, not silently reused.
    let first = store
        .feeds()
        .page(&FeedKind::Hot, PageRequest::first(1))
        .await
        .unwrap();
    store.feeds().refresh_hot().await.unwrap();
    assert!(matches!(
        store
            .feeds()
            .page(&FeedKind::Hot, PageRequest::after(1, first.next.unwrap()))
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::Cursor { .. },
            ..
        })
    ));

    // At T0+26h, A (created 26 h ago) is out, and only D's recent like counts: B 2, D 1.
    clock.set(start + 26 * HOUR_MS);
    store.feeds().schedule_hot_refresh().await.unwrap();
    store.run_pending().await.unwrap();
    let items = store.feeds().items(&FeedKind::Hot).await.unwrap();
    let scored: Vec<(PostId, f64)> = items.iter().map(|item| (item.post, item.score)).collect();
    assert_eq!(scored, [(b, 2.0), (d, 1.0)]);

    // Total counters are not windowed.
    assert_eq!(store.likes().counters(a).await.unwrap().likes, 5);
}

#[tokio::test]
async fn personal_feeds_follow_the_follow_list() {
    let follows = Arc::new(FollowList::from_pairs([
        ("bob", "ann"),
        ("bob", "cat"),
        ("dan", "ann"),
    ]));
    let (t, store) = store_with("feed_personal", |b| b.follows(follows.clone())).await;
    users(&store, &["ann", "bob", "cat", "dan", "eve", "erin"]).await;
    let a1 = post(&store, "ann", "a1", "x").await.id;
    let c1 = post(&store, "cat", "c1", "x").await.id;
    let e1 = post(&store, "eve", "e1", "x").await.id;
    let a2 = post(&store, "ann", "a2", "x").await.id;
    store.run_pending().await.unwrap();

    // The commands of one post's fan-out job, run by `run_pending`.
    let extra = post(&store, "cat", "c2", "x").await.id;
    let (ran, commands) = t.commands.measure(store.run_pending()).await;
    assert_eq!(ran.unwrap(), 1);
    let expected: &[&str] = if t.info.capabilities().atomic_updates {
        // due jobs, claim, re-check, post, create feeds, push, delete job, release, due jobs
        &[
            "find", "insert", "find", "find", "insert", "update", "delete", "delete", "find",
        ]
    } else {
        // ... with the feeds locked, read, written back and unlocked
        &[
            "find", "insert", "find", "find", "insert", "find", "update", "delete", "delete",
            "delete", "find",
        ]
    };
    assert_eq!(commands, expected);
    store
        .jobs()
        .enqueue("post_created", doc! { "post": extra.0 })
        .await
        .unwrap();

    let feed_of = |user: &str| FeedKind::User(user.to_owned());
    assert_eq!(
        read_feed(&store, &feed_of("bob"), 2).await,
        [extra, a2, c1, a1]
    );
    assert_eq!(read_feed(&store, &feed_of("dan"), 2).await, [a2, a1]);
    assert_eq!(
        read_feed(&store, &feed_of("ann"), 2).await,
        [a2, a1],
        "own posts"
    );
    assert!(read_feed(&store, &feed_of("erin"), 2).await.is_empty());

    // Fan-out is idempotent: the same job again adds nothing.
    store
        .jobs()
        .enqueue("post_created", doc! { "post": a2.0 })
        .await
        .unwrap();
    store.run_pending().await.unwrap();
    assert_eq!(
        read_feed(&store, &feed_of("bob"), 10).await,
        [extra, a2, c1, a1]
    );
    assert_eq!(
        read_feed(&store, &FeedKind::Latest, 10).await,
        [extra, a2, e1, c1, a1]
    );

    // A new follower's feed is rebuilt from whom they follow.
    follows.follow("erin", "eve");
    follows.follow("erin", "cat");
    assert_eq!(store.feeds().rebuild_user("erin").await.unwrap(), 3);
    assert_eq!(
        read_feed(&store, &feed_of("erin"), 1).await,
        [extra, e1, c1]
    );
    assert_eq!(count(&t, "feed_jobs").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_drain_concurrent_posts_into_every_feed() {
    let follows = Arc::new(FollowList::from_pairs([("bob", "ann"), ("bob", "cat")]));
    let (t, store) = store_with("feed_workers", |b| b.follows(follows.clone()).job_batch(1)).await;
    users(&store, &["ann", "bob", "cat"]).await;
    // Posts created by several tasks at once, then four workers taking one job at a time: the
    // fan-outs of different posts update the same feeds ("latest", bob's) concurrently.
    let mut tasks = Vec::new();
    for i in 0..24 {
        let store = store.clone();
        let author = if i % 2 == 0 { "ann" } else { "cat" };
        tasks.push(tokio::spawn(async move {
            post(&store, author, &format!("p{i}"), "x").await
        }));
    }
    let mut created = Vec::new();
    for task in tasks {
        created.push(task.await.unwrap());
    }
    let workers: Vec<_> = (0..4).map(|_| store.start_worker()).collect();
    store
        .wait_until_drained(Duration::from_secs(30))
        .await
        .unwrap();
    for worker in workers {
        assert_eq!(worker.last_error(), None);
        worker.stop().await;
    }
    // Newest first: by creation time, ties to the larger id.
    created.sort_by(|a, b| b.created.cmp(&a.created).then(b.id.cmp(&a.id)));
    let newest_first = ids(&created);
    assert_eq!(read_feed(&store, &FeedKind::Latest, 5).await, newest_first);
    assert_eq!(
        read_feed(&store, &FeedKind::User("bob".into()), 5).await,
        newest_first,
        "bob follows both authors"
    );
    assert_eq!(count(&t, "feed_jobs").await, 0);
    assert_eq!(count(&t, "feed_jobs_locks").await, 0);
    assert_eq!(count(&t, "feed_locks").await, 0);
}

/// Records each job it runs; the first `block` runs never finish.
#[derive(Debug, Default)]
struct Recorder {
    runs: Mutex<Vec<(bson::oid::ObjectId, Instant)>>,
    block: bool,
    started: tokio::sync::Notify,
}

#[async_trait]
impl JobHandler for Recorder {
    async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
        self.runs.lock().unwrap().push((job.id, Instant::now()));
        self.started.notify_one();
        if self.block {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_worker_job_is_finished_by_another_after_the_lease() {
    let t = testing::test_db("feed_jobs_lease").await;
    let lease = Duration::from_millis(400);
    let queue = JobQueue::builder(&t.db)
        .collection("jobs", "work")
        .lease(lease)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    queue.set_up().await.unwrap();

    let stuck = Arc::new(Recorder {
        block: true,
        ..Recorder::default()
    });
    let job = queue.enqueue("slow", doc! { "n": 1 }).await.unwrap();
    let dying = queue.start_worker(stuck.clone());
    stuck.started.notified().await;
    let claimed = stuck.runs.lock().unwrap()[0].1;
    dying.abort();
    assert_eq!(
        queue.pending().await.unwrap(),
        1,
        "the killed worker's job is still queued"
    );

    let rescuer = Arc::new(Recorder::default());
    let worker = queue.start_worker(rescuer.clone());
    queue
        .wait_until_drained(Duration::from_secs(10))
        .await
        .unwrap();
    worker.stop().await;
    let runs = rescuer.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0, job);
    assert!(
        runs[0].1.duration_since(claimed) >= lease - Duration::from_millis(50),
        "taken over only once the lease ran out"
    );

    // Two live workers share a batch of jobs: each job runs exactly once.
    let shared = Arc::new(Recorder::default());
    let mut jobs = Vec::new();
    for n in 0..12 {
        jobs.push(queue.enqueue("quick", doc! { "n": n }).await.unwrap());
    }
    let workers = [
        queue.start_worker(shared.clone()),
        queue.start_worker(shared.clone()),
    ];
    queue
        .wait_until_drained(Duration::from_secs(10))
        .await
        .unwrap();
    for worker in workers {
        worker.stop().await;
    }
    let mut ran: Vec<_> = shared
        .runs
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| *id)
        .collect();
    ran.sort();
    assert_eq!(ran, jobs, "every job once");

    // A timeout is a typed error.
    queue.enqueue("never", doc! {}).await.unwrap();
    assert!(matches!(
        queue.wait_until_drained(Duration::from_millis(50)).await,
        Err(Error::Timeout { .. })
    ));
}

#[tokio::test]
async fn search_matches_all_terms_in_order() {
    let (t, store) = store_with("feed_search", |b| b).await;
    users(&store, &["ann"]).await;
    let p1 = post(&store, "ann", "Learning Rust", "async rust is fun")
        .await
        .id;
    let p2 = post(&store, "ann", "Gardening", "tomatoes and rust on leaves")
        .await
        .id;
    let _p3 = post(&store, "ann", "Go notes", "goroutines").await.id;
    let p4 = post(&store, "ann", "Rust async", "rust rust").await.id;
    let p5 = post(&store, "ann", "Weekend", "walked; Rust meetup")
        .await
        .id;

    let all = |order, size| {
        let store = store.clone();
        async move {
            let mut found = Vec::new();
            let mut request = PageRequest::first(size);
            loop {
                let page = store.search().page("RUST", order, request).await.unwrap();
                found.extend(ids(&page.items));
                match page.next {
                    Some(cursor) => request = PageRequest::after(size, cursor),
                    None => return found,
                }
            }
        }
    };
    for size in [1, 2, 10] {
        assert_eq!(
            all(SearchOrder::Newest, size).await,
            [p5, p4, p2, p1],
            "size {size}"
        );
    }
    let best = all(SearchOrder::BestMatch, 10).await;
    assert_eq!(best[0], p4, "term in the title and twice in the body");
    assert_eq!(all(SearchOrder::BestMatch, 1).await, best, "pages agree");
    let mut sorted = best.clone();
    sorted.sort();
    assert_eq!(sorted, [p1, p2, p4, p5]);
    if !t.info.capabilities().text_search {
        // Fallback scores: p4 3+2, p1 3+1, p5 1, p2 1 (ties to the newer post).
        assert_eq!(best, [p4, p1, p5, p2]);
    }

    let both = store
        .search()
        .page("rust async", SearchOrder::Newest, PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(ids(&both.items), [p4, p1], "every term must match");
    let (page, commands) = t
        .commands
        .measure(
            store
                .search()
                .page("rust", SearchOrder::Newest, PageRequest::first(2)),
        )
        .await;
    assert_eq!(page.unwrap().items.len(), 2);
    assert_eq!(
        commands.len(),
        1,
        "one command per search page: {commands:?}"
    );
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_writes_nothing() {
    let (t, store) = store_with("feed_bad_input", |b| b.max_post_bytes(4096)).await;
    users(&store, &["ann", "bob"]).await;
    let kept = post(&store, "ann", "kept", "x").await.id;
    post(&store, "bob", "kept too", "x").await;
    store.run_pending().await.unwrap();
    // A cursor of a newest-first search, to hand where it does not belong.
    let search_cursor = store
        .search()
        .page("kept", SearchOrder::Newest, PageRequest::first(1))
        .await
        .unwrap()
        .next
        .expect("two posts match");
    let collections = [
        "posts",
        "users",
        "post_likes",
        "post_counters",
        "feed_jobs",
        "feeds",
    ];
    let mut before = HashMap::new();
    for name in collections {
        before.insert(name, count(&t, name).await);
    }

    let new =
        |author: &str, title: &str, body: &str| NewPost::new(author, title, body, Extra::default());
    t.commands.reset();
    assert!(matches!(
        store.posts().create(new("ann", " ", "")).await,
        Err(Error::InvalidInput {
            reason: Invalid::Blank {
                what: "title and body"
            },
            ..
        })
    ));
    assert!(matches!(
        store
            .posts()
            .create(new("ann", "t", "b").image(Media::new("", "no url")))
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::Blank { what: "media url" },
            ..
        })
    ));
    assert!(matches!(
        store
            .posts()
            .create(new("ann", "big", &"x".repeat(5000)))
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::TooLarge {
                what: "post",
                limit: 4096,
                ..
            },
            ..
        })
    ));
    assert!(matches!(
        "f.zz".parse::<Cursor>(),
        Err(Error::InvalidInput {
            reason: Invalid::Cursor { .. },
            ..
        })
    ));
    assert!(
        matches!(
            store
                .feeds()
                .page(
                    &FeedKind::Latest,
                    PageRequest::after(5, search_cursor.clone())
                )
                .await,
            Err(Error::InvalidInput {
                reason: Invalid::Cursor { .. },
                ..
            })
        ),
        "a search cursor is not a feed cursor"
    );
    assert!(matches!(
        store
            .search()
            .page(
                "x",
                SearchOrder::BestMatch,
                PageRequest::after(5, search_cursor)
            )
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::Cursor { .. },
            ..
        })
    ));
    assert!(matches!(
        store
            .search()
            .page("  ", SearchOrder::Newest, PageRequest::first(5))
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::Blank {
                what: "search terms"
            },
            ..
        })
    ));
    assert!(matches!(
        store
            .feeds()
            .page(&FeedKind::Latest, PageRequest::first(0))
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::PageLimit { .. },
            ..
        })
    ));
    // Empty and whitespace-only are the same error, `Blank`, as in every module: naming the
    // role of a user id, the field of other text.
    for blank in ["", " ", "\t "] {
        for result in [
            store
                .users()
                .create(NewUser::new(blank, "x"))
                .await
                .map(drop),
            store.posts().create(new(blank, "t", "b")).await.map(drop),
            store.likes().like(kept, blank).await.map(drop),
            store.likes().unlike(kept, blank).await.map(drop),
            store.users().rename(blank, "x").await.map(drop),
            store.users().get(blank).await.map(drop),
            store
                .feeds()
                .page(&FeedKind::User(blank.to_owned()), PageRequest::first(5))
                .await
                .map(drop),
            store.feeds().rebuild_user(blank).await.map(drop),
        ] {
            assert!(
                matches!(
                    result,
                    Err(Error::InvalidInput {
                        reason: Invalid::Blank {
                            what: "user" | "author"
                        },
                        ..
                    })
                ),
                "{blank:?}: {result:?}"
            );
        }
        assert!(
            matches!(
                store.users().create(NewUser::new("u9", blank)).await,
                Err(Error::InvalidInput {
                    reason: Invalid::Blank { what: "username" },
                    ..
                })
            ),
            "{blank:?}"
        );
    }
    assert_eq!(t.commands.total(), 0, "caught before any command");

    assert!(matches!(
        store.posts().create(new("ghost", "t", "b")).await,
        Err(Error::NotFound {
            what: Entity::User,
            ..
        })
    ));
    let unknown = PostId::new();
    assert!(matches!(
        store.posts().get(unknown).await,
        Err(Error::NotFound {
            what: Entity::Post,
            ..
        })
    ));
    assert!(matches!(
        store.likes().like(unknown, "ann").await,
        Err(Error::NotFound {
            what: Entity::Post,
            ..
        })
    ));
    assert!(matches!(
        store.likes().unlike(unknown, "ann").await,
        Err(Error::NotFound {
            what: Entity::Post,
            ..
        })
    ));
    assert!(matches!(
        store.likes().counters(unknown).await,
        Err(Error::NotFound {
            what: Entity::Post,
            ..
        })
    ));
    assert!(matches!(
        store.likes().like(kept, "ghost").await,
        Err(Error::NotFound {
            what: Entity::User,
            ..
        })
    ));
    assert!(matches!(
        store.likes().unlike(kept, "ghost").await,
        Err(Error::NotFound {
            what: Entity::User,
            ..
        })
    ));
    assert!(matches!(
        store
            .feeds()
            .page(&FeedKind::User("ghost".into()), PageRequest::first(5))
            .await,
        Err(Error::NotFound {
            what: Entity::User,
            ..
        })
    ));
    assert!(matches!(
        store.feeds().rebuild_user("ghost").await,
        Err(Error::NotFound {
            what: Entity::User,
            ..
        })
    ));
    assert!(matches!(
        store.users().create(NewUser::new("ann", "other")).await,
        Err(Error::AlreadyExists {
            what: Entity::User,
            ..
        })
    ));
    assert!(matches!(
        store.users().create(NewUser::new("carl", "bob")).await,
        Err(Error::AlreadyExists {
            what: Entity::Username,
            ..
        })
    ));
    assert!(matches!(
        store.users().rename("ann", "bob").await,
        Err(Error::AlreadyExists {
            what: Entity::Username,
            ..
        })
    ));
    assert!(matches!(
        store.users().rename("ghost", "casper").await,
        Err(Error::NotFound {
            what: Entity::User,
            ..
        })
    ));

    for name in collections {
        assert_eq!(count(&t, name).await, before[name], "{name} unchanged");
    }
    assert_eq!(store.users().get("ann").await.unwrap().username, "ann");
    assert!(store
        .users()
        .unfinished_propagations()
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.posts().get(kept).await.unwrap().created_by.username,
        "ann"
    );
}

/// Fails every run.
#[derive(Debug)]
struct Failing;

#[async_trait]
impl JobHandler for Failing {
    async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
        Err(job.error("always fails"))
    }
}

#[tokio::test]
async fn failing_job_is_retried_then_marked_failed() {
    let t = testing::test_db("feed_jobs_failing").await;
    let queue = JobQueue::builder(&t.db)
        .collection("jobs", "work")
        .max_attempts(3)
        .retry_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    queue.set_up().await.unwrap();
    let job = queue.enqueue("doomed", doc! {}).await.unwrap();
    let mut runs = 0;
    let started = Instant::now();
    while queue.pending().await.unwrap() > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never marked failed"
        );
        runs += queue.run_once(&Failing).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(runs, 3, "max_attempts runs, then no more");
    assert_eq!(queue.failed().await.unwrap(), 1);
    let stored = t
        .collection::<Document>("work")
        .find_one(doc! { "_id": job })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.get_str("last_error").unwrap(),
        "job `doomed` failed: always fails"
    );
    queue
        .wait_until_drained(Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(queue.run_once(&Failing).await.unwrap(), 0);
}

/// Puts one author's posts above everyone else's, newest first within each group.
#[derive(Debug)]
struct Pinned(&'static str);

impl Ranking for Pinned {
    fn score(&self, feed: &FeedKind, candidate: &Candidate) -> f64 {
        let base = DefaultRanking.score(feed, candidate);
        if candidate.author == self.0 {
            base + 1e14
        } else {
            base
        }
    }
}

#[tokio::test]
async fn ranking_is_pluggable() {
    let (_t, store) = store_with("feed_ranking", |b| b.ranking(Arc::new(Pinned("cat")))).await;
    users(&store, &["ann", "cat"]).await;
    let c1 = post(&store, "cat", "c1", "x").await.id;
    let a1 = post(&store, "ann", "a1", "x").await.id;
    let c2 = post(&store, "cat", "c2", "x").await.id;
    let a2 = post(&store, "ann", "a2", "x").await.id;
    store.run_pending().await.unwrap();
    for size in [1, 3] {
        assert_eq!(
            read_feed(&store, &FeedKind::Latest, size).await,
            [c2, c1, a2, a1]
        );
    }
}

/// Records each job's start and deadline, then sleeps.
#[derive(Debug)]
struct Sleepy {
    runs: Mutex<Vec<(bson::oid::ObjectId, Instant, Option<Instant>)>>,
    sleep: Duration,
}

#[async_trait]
impl JobHandler for Sleepy {
    async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
        self.runs
            .lock()
            .unwrap()
            .push((job.id, Instant::now(), job.deadline()));
        tokio::time::sleep(self.sleep).await;
        Ok(())
    }
}

#[tokio::test]
async fn a_batch_stops_starting_jobs_before_its_lease_runs_out() {
    let t = testing::test_db("feed_jobs_batch_lease").await;
    let lease = Duration::from_millis(400);
    let queue = JobQueue::builder(&t.db)
        .collection("jobs", "work")
        .lease(lease)
        .batch(4)
        .build()
        .unwrap();
    queue.set_up().await.unwrap();
    for n in 0..4 {
        queue.enqueue("slow", doc! { "n": n }).await.unwrap();
    }
    let sleepy = Sleepy {
        runs: Mutex::new(Vec::new()),
        sleep: Duration::from_millis(150),
    };
    let before = Instant::now();
    assert_eq!(
        queue.run_once(&sleepy).await.unwrap(),
        4,
        "all four claimed"
    );
    let runs = sleepy.runs.lock().unwrap().clone();
    // Three quarters of 400 ms: the third job would start after 300 ms of sleep, past the
    // deadline, so two at most start (one only, where the first started late on a busy server).
    assert!(
        (1..=2).contains(&runs.len()),
        "no job started past lease - margin: {} started",
        runs.len()
    );
    let started_first = runs.len();
    for (_, started, deadline) in &runs {
        let deadline = deadline.expect("a queued job has a deadline");
        assert!(*started < deadline);
        // Claimed after `before` and before the first job started.
        assert!(deadline >= before + (lease - lease / 4));
        assert!(deadline <= runs[0].1 + (lease - lease / 4));
    }
    assert_eq!(queue.pending().await.unwrap(), 4 - started_first as u64);
    assert_eq!(count(&t, "work_locks").await, 0, "unstarted jobs released");
    // The unstarted jobs are claimed again (two runs at most, each starting one or two).
    for _ in 0..3 {
        if sleepy.runs.lock().unwrap().len() == 4 {
            break;
        }
        assert!(queue.run_once(&sleepy).await.unwrap() > 0, "claimed again");
    }
    assert_eq!(sleepy.runs.lock().unwrap().len(), 4);
    assert_eq!(queue.pending().await.unwrap(), 0);

    // A claimed job that cannot be read back fails the run, and its claim is released.
    t.collection::<Document>("work")
        .insert_one(doc! {
            "_id": bson::oid::ObjectId::new(), "kind": "bad", "payload": 5, "attempts": 0,
            "not_before": bson::DateTime::now(), "failed": false,
        })
        .await
        .unwrap();
    let failed = queue.run_once(&sleepy).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(count(&t, "work_locks").await, 0, "claim released on error");
}

#[tokio::test]
async fn first_retry_waits_the_retry_delay() {
    let t = testing::test_db("feed_jobs_retry_delay").await;
    let delay = Duration::from_secs(4);
    let queue = JobQueue::builder(&t.db)
        .collection("jobs", "work")
        .retry_delay(delay)
        .build()
        .unwrap();
    let job = queue.enqueue("doomed", doc! {}).await.unwrap();
    let before = bson::DateTime::now().timestamp_millis();
    assert_eq!(queue.run_once(&Failing).await.unwrap(), 1);
    let after = bson::DateTime::now().timestamp_millis();
    let stored = t
        .collection::<Document>("work")
        .find_one(doc! { "_id": job })
        .await
        .unwrap()
        .unwrap();
    let not_before = stored
        .get_datetime("not_before")
        .unwrap()
        .timestamp_millis();
    let wait = delay.as_millis() as i64;
    assert!(
        not_before >= before + wait && not_before <= after + wait,
        "first retry after one retry_delay, not two"
    );
}

#[tokio::test]
async fn propagation_jobs_stop_at_their_deadline_and_resume() {
    // A 1 ms lease: every claim's deadline has passed when the job starts, so each propagation
    // job runs one batch and queues the rest.
    let (_t, store) = store_with("feed_propagation_deadline", |b| {
        b.job_lease(Duration::from_millis(1)).propagation_batch(1)
    })
    .await;
    users(&store, &["ann"]).await;
    for i in 0..4 {
        post(&store, "ann", &format!("p{i}"), "x").await;
    }
    store.run_pending().await.unwrap();
    let propagation = store
        .users()
        .rename_in_background("ann", "annie")
        .await
        .unwrap();
    let ran = store.run_pending().await.unwrap();
    assert!(ran > 1, "the propagation was split over {ran} jobs");
    assert!(store
        .users()
        .unfinished_propagations()
        .await
        .unwrap()
        .is_empty());
    assert!(
        store
            .users()
            .run_propagation(propagation, None)
            .await
            .unwrap()
            .done
    );
    let latest = store
        .feeds()
        .page(&FeedKind::Latest, PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(latest.items.len(), 4);
    for post in latest.items {
        assert_eq!(post.created_by.username, "annie");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_renames_leave_every_copy_at_the_final_chunk() {
    let (t, store) = store_with("feed_concurrent_renames", |b| b).await;
    users(&store, &["ann"]).await;
    for i in 0..5 {
        post(&store, "ann", &format!("p{i}"), "x").await;
    }
    let renames = 8;
    let mut tasks = Vec::new();
    for i in 0..renames {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.users().rename("ann", &format!("ann{i}")).await
        }));
    }
    for task in tasks {
        assert!(task.await.unwrap().unwrap().done);
    }
    let user = store.users().get("ann").await.unwrap();
    assert_eq!(user.revision, renames, "every rename got its own revision");
    let posts: Vec<Document> = t
        .collection::<Document>("posts")
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(posts.len(), 5);
    for post in posts {
        let copy: mongo_social::feed::UserChunk =
            bson::from_bson(post.get("created_by").unwrap().clone()).unwrap();
        assert_eq!(copy, user.chunk());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_increments_undo_their_like_and_recounts_stay_exact() {
    let (t, store) = store_with("feed_like_undo", |b| b).await;
    let names: Vec<String> = (0..12).map(|i| format!("u{i:02}")).collect();
    for name in &names {
        store
            .users()
            .create(NewUser::new(name, name))
            .await
            .unwrap();
    }
    users(&store, &["ann"]).await;
    let target = post(&store, "ann", "Like me", "please").await.id;
    let counters = t.collection::<Document>("post_counters");
    let break_counter = |likes: bson::Bson| {
        let counters = counters.clone();
        async move {
            counters
                .update_one(
                    doc! { "_id": target.0 },
                    doc! { "$set": { "likes": likes } },
                )
                .upsert(true)
                .await
                .unwrap();
        }
    };

    // An `$inc` that fails (the counter is not a number) leaves no uncounted like behind.
    break_counter(bson::Bson::String("broken".into())).await;
    assert!(store.likes().like(target, "u00").await.is_err());
    assert!(
        !store.likes().is_liked(target, "u00").await.unwrap(),
        "like undone"
    );
    break_counter(bson::Bson::Int64(0)).await;
    assert!(
        store.likes().like(target, "u00").await.unwrap(),
        "the retry counts"
    );
    assert_eq!(store.likes().counters(target).await.unwrap().likes, 1);
    // Likewise an unlike whose `$inc` fails puts the like back.
    break_counter(bson::Bson::String("broken".into())).await;
    assert!(store.likes().unlike(target, "u00").await.is_err());
    assert!(
        store.likes().is_liked(target, "u00").await.unwrap(),
        "like put back"
    );
    break_counter(bson::Bson::Int64(1)).await;
    assert!(
        store.likes().unlike(target, "u00").await.unwrap(),
        "the retry counts"
    );
    assert_eq!(store.likes().counters(target).await.unwrap().likes, 0);

    // Recounts racing likes: exact where the like and its $inc share the counter lock.
    let mut tasks = Vec::new();
    for name in &names {
        let (liker, name) = (store.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            liker.likes().like(target, &name).await.map(|_| ())
        }));
        let counter = store.clone();
        tasks.push(tokio::spawn(async move {
            counter.likes().recount(target).await.map(|_| ())
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(count(&t, "post_likes").await, 12);
    if !t.info.capabilities().atomic_updates {
        assert_eq!(store.likes().counters(target).await.unwrap().likes, 12);
    }
    assert_eq!(store.likes().recount(target).await.unwrap(), 12);
    assert_eq!(store.likes().counters(target).await.unwrap().likes, 12);
}

/// The collections as a failure part-way through a like or unlike leaves them (written here by
/// hand, so no proxy is needed), then the pair's next like or unlike: the counter ends equal to
/// the stored likes, and a like being removed reads as absent.
#[tokio::test]
async fn interrupted_likes_and_unlikes_are_finished_once() {
    let (t, store) = store_with("feed_like_journal", |b| b).await;
    users(&store, &["ann", "bob", "cid", "dan", "eve"]).await;
    let target = post(&store, "ann", "Journal", "of likes").await.id;
    let likes = t.collection::<Document>("post_likes");
    let counters = t.collection::<Document>("post_counters");
    let exact = |when: &'static str| {
        let (store, likes) = (store.clone(), likes.clone());
        async move {
            let stored = likes
                .count_documents(doc! { "post": target.0 })
                .await
                .unwrap();
            let counted = store.likes().counters(target).await.unwrap().likes;
            assert_eq!(
                counted, stored as i64,
                "{when}: counter equals the stored likes"
            );
        }
    };
    // A like interrupted after its insert: stored (with its op id, not yet counted), never
    // counted.
    let interrupted_like = |user: &'static str| {
        let likes = likes.clone();
        async move {
            likes
                .insert_one(doc! {
                    "_id": { "post": target.0, "user": user },
                    "post": target.0,
                    "user": user,
                    "at": bson::DateTime::now(),
                    "op": bson::oid::ObjectId::new(),
                    "pending": true,
                })
                .await
                .unwrap();
        }
    };

    interrupted_like("bob").await;
    assert!(store.likes().unlike(target, "bob").await.unwrap());
    exact("an interrupted like, then an unlike").await;
    assert!(!store.likes().is_liked(target, "bob").await.unwrap());

    interrupted_like("cid").await;
    assert!(
        !store.likes().like(target, "cid").await.unwrap(),
        "the repeat finds the like stored"
    );
    exact("an interrupted like, then the like again").await;
    assert!(store.likes().is_liked(target, "cid").await.unwrap());

    // An unlike interrupted after its `-1` landed: the like is still stored, marked "removing"
    // with the unlike's op id, which the counter holds.
    assert!(store.likes().like(target, "dan").await.unwrap());
    let unlike_op = bson::oid::ObjectId::new();
    likes
        .update_one(
            doc! { "_id": { "post": target.0, "user": "dan" }, "post": target.0 },
            doc! { "$set": { "removing": unlike_op } },
        )
        .await
        .unwrap();
    counters
        .update_one(
            doc! { "_id": target.0 },
            doc! { "$inc": { "likes": -1 }, "$push": { "ops": unlike_op } },
        )
        .await
        .unwrap();
    assert!(
        !store.likes().is_liked(target, "dan").await.unwrap(),
        "a like being removed reads as absent"
    );
    assert!(
        store.likes().like(target, "dan").await.unwrap(),
        "liked anew"
    );
    exact("an interrupted unlike, then a like").await;
    assert!(store.likes().unlike(target, "dan").await.unwrap());
    exact("then an unlike").await;

    // An unlike interrupted before its `-1`: marked, not uncounted; the unlike again.
    assert!(store.likes().like(target, "eve").await.unwrap());
    likes
        .update_one(
            doc! { "_id": { "post": target.0, "user": "eve" }, "post": target.0 },
            doc! { "$set": { "removing": bson::oid::ObjectId::new() } },
        )
        .await
        .unwrap();
    assert!(!store.likes().is_liked(target, "eve").await.unwrap());
    store.likes().unlike(target, "eve").await.unwrap();
    exact("an interrupted unlike, then the unlike again").await;
    assert_eq!(
        store.likes().counters(target).await.unwrap().likes,
        1,
        "cid's"
    );
    assert_eq!(store.likes().recount(target).await.unwrap(), 1);
}

/// Marks nobody touches again are finished by `settle_likes` (and by `recount_likes` before it
/// counts), each once.
#[tokio::test]
async fn settle_likes_finishes_interrupted_likes_once() {
    let (t, store) = store_with("feed_like_settle", |b| b).await;
    users(&store, &["ann", "bob", "cid"]).await;
    let target = post(&store, "ann", "Settle", "me").await.id;
    let likes = t.collection::<Document>("post_likes");
    assert!(store.likes().like(target, "ann").await.unwrap());
    // bob's like stored but never counted; cid's like counted, then marked by an unlike that
    // never uncounted it.
    likes
        .insert_one(doc! {
            "_id": { "post": target.0, "user": "bob" },
            "post": target.0,
            "user": "bob",
            "at": bson::DateTime::now(),
            "op": bson::oid::ObjectId::new(),
            "pending": true,
        })
        .await
        .unwrap();
    assert!(store.likes().like(target, "cid").await.unwrap());
    likes
        .update_one(
            doc! { "_id": { "post": target.0, "user": "cid" }, "post": target.0 },
            doc! { "$set": { "removing": bson::oid::ObjectId::new() } },
        )
        .await
        .unwrap();
    assert_eq!(store.likes().settle(target).await.unwrap(), 2);
    assert_eq!(count(&t, "post_likes").await, 2, "ann's and bob's");
    assert_eq!(store.likes().counters(target).await.unwrap().likes, 2);
    assert_eq!(
        store.likes().settle(target).await.unwrap(),
        0,
        "nothing left"
    );
    assert_eq!(store.likes().recount(target).await.unwrap(), 2);
    assert!(store.likes().is_liked(target, "bob").await.unwrap());
    assert!(!store.likes().is_liked(target, "cid").await.unwrap());
}

#[tokio::test]
async fn old_posts_liked_recently_do_not_crowd_out_the_hot_window() {
    let clock = Arc::new(TestClock(AtomicI64::new(0)));
    let start = bson::DateTime::now().timestamp_millis() - 30 * HOUR_MS;
    clock.set(start);
    // 4 × max_feed_len = 4 candidates.
    let (_t, store) = store_with("feed_hot_crowding", |b| {
        b.clock(clock.clone()).max_feed_len(1)
    })
    .await;
    users(&store, &["ann", "fan0", "fan1"]).await;
    let mut old = Vec::new();
    for i in 0..5 {
        old.push(post(&store, "ann", &format!("old {i}"), "x").await.id);
    }
    clock.set(start + 25 * HOUR_MS);
    let new = post(&store, "ann", "new", "x").await.id;
    clock.set(start + 26 * HOUR_MS);
    for post in &old {
        store.likes().like(*post, "fan0").await.unwrap();
        store.likes().like(*post, "fan1").await.unwrap();
    }
    store.likes().like(new, "fan0").await.unwrap();
    assert_eq!(store.feeds().refresh_hot().await.unwrap(), 1);
    let hot = store.feeds().items(&FeedKind::Hot).await.unwrap();
    assert_eq!(hot.len(), 1);
    assert_eq!((hot[0].post, hot[0].score), (new, 1.0));
}

/// Names followers twice, and an empty follower.
#[derive(Debug)]
struct Repeating;

#[async_trait]
impl mongo_social::graph::FollowSource for Repeating {
    async fn followers_of(&self, _user: &str) -> mongo_social::Result<Vec<String>> {
        Ok(vec![
            "bob".into(),
            "bob".into(),
            String::new(),
            "ann".into(),
        ])
    }

    async fn followees_of(&self, _user: &str) -> mongo_social::Result<Vec<String>> {
        Ok(vec!["ann".into(), "ann".into()])
    }
}

/// Gives every post of `nan` a NaN score.
#[derive(Debug)]
struct Broken;

impl Ranking for Broken {
    fn score(&self, feed: &FeedKind, candidate: &Candidate) -> f64 {
        if candidate.author == "nan" {
            f64::NAN
        } else {
            DefaultRanking.score(feed, candidate)
        }
    }
}

#[tokio::test]
async fn fan_out_tolerates_repeated_followers_and_refuses_bad_scores() {
    let (t, store) = store_with("feed_fan_out_edges", |b| {
        b.follows(Arc::new(Repeating))
            .ranking(Arc::new(Broken))
            .job_retry_delay(Duration::from_millis(1))
    })
    .await;
    users(&store, &["ann", "bob", "nan"]).await;
    let p = post(&store, "ann", "once", "x").await.id;
    assert_eq!(store.run_pending().await.unwrap(), 1);
    assert_eq!(store.jobs().pending().await.unwrap(), 0);
    assert_eq!(
        read_feed(&store, &FeedKind::User("bob".into()), 5).await,
        [p]
    );
    assert_eq!(store.feeds().rebuild_user("bob").await.unwrap(), 1);

    // A non-finite score is a typed error, and no feed gets it.
    post(&store, "nan", "bad", "x").await;
    store.run_pending().await.unwrap();
    let job = t
        .collection::<Document>("feed_jobs")
        .find_one(doc! {})
        .await
        .unwrap()
        .expect("the job stays queued");
    assert!(job.get_str("last_error").unwrap().contains("non-finite"));
    assert_eq!(read_feed(&store, &FeedKind::Latest, 5).await, [p]);
    assert!(matches!(
        store.feeds().rebuild_user("nan").await,
        Err(Error::InvalidConfig { .. })
    ));
    assert!(store
        .feeds()
        .items(&FeedKind::User("nan".into()))
        .await
        .unwrap()
        .is_empty());
}

/// Runs due jobs until none is pending, for at most 10 seconds. A job retried while its post is
/// missing waits a delay that doubles per attempt, and a loaded machine makes more attempts in
/// one `run_pending`, so a fixed sleep before the next run may fall short of the delay.
async fn run_until_drained(store: &Store) {
    let started = std::time::Instant::now();
    while store.jobs().pending().await.unwrap() > 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "jobs drain");
        store.run_pending().await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn fan_out_waits_for_a_post_whose_job_came_first() {
    let clock = Arc::new(TestClock(AtomicI64::new(0)));
    clock.set(bson::DateTime::now().timestamp_millis());
    let (t, store) = store_with("feed_job_before_post", |b| {
        b.clock(clock.clone())
            .job_retry_delay(Duration::from_millis(1))
    })
    .await;
    users(&store, &["ann"]).await;
    // As after a crash between the job's insert and the post's.
    let missing = PostId::new();
    let created = clock.now();
    store
        .jobs()
        .enqueue(
            "post_created",
            doc! { "post": missing.0, "created": created },
        )
        .await
        .unwrap();
    store.run_pending().await.unwrap();
    assert_eq!(
        store.jobs().pending().await.unwrap(),
        1,
        "retried while young"
    );

    // The post arrives: the retry puts it into the feeds.
    t.collection::<Document>("posts")
        .insert_one(doc! {
            "_id": missing.0, "title": "late", "body": "x", "created": created,
            "created_by": { "id": "ann", "username": "ann", "revision": 0_i64 },
            "images": [], "videos": [], "audio": [], "extension": { "tags": [] },
        })
        .await
        .unwrap();
    run_until_drained(&store).await;
    assert_eq!(read_feed(&store, &FeedKind::Latest, 5).await, [missing]);

    // A post that never appears: its job is dropped once old.
    let never = PostId::new();
    store
        .jobs()
        .enqueue(
            "post_created",
            doc! { "post": never.0, "created": clock.now() },
        )
        .await
        .unwrap();
    store.run_pending().await.unwrap();
    assert_eq!(store.jobs().pending().await.unwrap(), 1);
    clock.set(clock.now().timestamp_millis() + HOUR_MS);
    run_until_drained(&store).await;
    assert_eq!(store.jobs().pending().await.unwrap(), 0, "dropped");
    assert_eq!(store.jobs().failed().await.unwrap(), 0);

    // Normal posts: job, then post, and it reaches the feed.
    let p = post(&store, "ann", "now", "x").await.id;
    store.run_pending().await.unwrap();
    assert_eq!(read_feed(&store, &FeedKind::Latest, 5).await, [p, missing]);
    assert!(
        store
            .shard_keys()
            .iter()
            .all(|key| key.collection != "users"),
        "users stays unsharded: its unique username index"
    );
}

/// Setup is idempotent: a second store on the same database (the application's next start)
/// creates its indexes again (on FerretDB one `createIndexes` naming several existing indexes
/// dropped the connection) and reads what the first wrote.
#[tokio::test]
async fn reopen_reads_what_was_written() {
    let (t, first) = store_with("feed_reopen", |b| b).await;
    users(&first, &["ann", "bob"]).await;
    let written = post(&first, "ann", "Hello", "First post").await;
    first.run_pending().await.unwrap();
    let second = FeedStore::<Extra>::builder(&t.db)
        .capabilities(t.info.capabilities())
        .build()
        .unwrap();
    second.set_up().await.expect("indexes on the next start");
    second.set_up().await.expect("indexes again");
    assert_eq!(second.posts().get(written.id).await.unwrap(), written);
    assert_eq!(
        read_feed(&second, &FeedKind::Latest, 10).await,
        [written.id]
    );
    let taken = second.users().create(NewUser::new("ann2", "ann")).await;
    assert!(
        matches!(
            taken,
            Err(Error::AlreadyExists {
                what: Entity::Username,
                ..
            })
        ),
        "{taken:?}"
    );
}

/// Used before `create_indexes`, the store creates the unique index it depends on before its
/// first write: a username is still taken once.
#[tokio::test]
async fn a_store_used_before_create_indexes_keeps_usernames_unique() {
    let t = testing::test_db("feed_no_indexes").await;
    let store = FeedStore::<Extra>::builder(&t.db)
        .capabilities(t.info.capabilities())
        .build()
        .unwrap();
    store
        .users()
        .create(NewUser::new("u1", "ann"))
        .await
        .unwrap();
    let taken = store.users().create(NewUser::new("u2", "ann")).await;
    assert!(
        matches!(
            taken,
            Err(Error::AlreadyExists {
                what: Entity::Username,
                ..
            })
        ),
        "{taken:?}"
    );
    store
        .users()
        .create(NewUser::new("u3", "bob"))
        .await
        .unwrap();
    let taken = store.users().rename("u3", "ann").await;
    assert!(
        matches!(
            taken,
            Err(Error::AlreadyExists {
                what: Entity::Username,
                ..
            })
        ),
        "{taken:?}"
    );
    assert_eq!(count(&t, "users").await, 2);
}
