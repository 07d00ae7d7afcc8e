//! What notifications cost: a like with and without a notifier, and a page of a notification
//! feed that gathered 10,000 events.
//!
//! ```text
//! cargo bench --bench notifications                                    # local FerretDB
//! MONGO_SOCIAL_SERVER=mongo-java-server cargo bench --bench notifications
//! MONGO_SOCIAL_BENCH_EVENTS=1000 cargo bench --bench notifications     # a smaller feed
//! ```
//!
//! - `notifications/like`: a like of a fresh post by a fresh user, then its unlike, so every
//!   iteration does the same work; `off` without a notifier, `on` with a
//!   [`NotificationStore`] telling the post's author.
//! - `notifications/page of 20`: the first page (20 groups, newest first) and the unseen and
//!   unread counts of a recipient whose feed took `MONGO_SOCIAL_BENCH_EVENTS` events (10,000 by
//!   default): 100 actors liking 100 posts, so 100 groups of 100 actors.
//!
//! Before timing, one line per measurement gives the commands it sent.

use std::sync::Arc;
use std::time::Duration;

use criterion::BenchmarkId;
use mongo_social::feed::{FeedStore, NewPost, NewUser};
use mongo_social::notifications::{Activity, Event, Kind, NotificationStore};
use mongo_social::{feed::PostId, PageRequest};

#[path = "support/bench_env.rs"]
#[allow(dead_code)] // shared by every bench; this one uses part of it
mod bench_env;

/// A feed store over `db`, telling `notifications` of likes where given.
fn feed(
    db: &mongodb::Database,
    notifications: Option<Arc<NotificationStore<()>>>,
) -> FeedStore<()> {
    let builder = FeedStore::builder(db);
    match notifications {
        Some(notifications) => builder.notifier(notifications),
        None => builder,
    }
    .build()
    .expect("feed store")
}

fn main() {
    let (rt, client, commands, info) = bench_env::connect();
    eprintln!("server: {}", info.describe());
    let mut c = bench_env::criterion(Duration::from_secs(3));

    let mut likes = c.benchmark_group("notifications/like");
    for notify in [false, true] {
        let name = if notify { "on" } else { "off" };
        let db = client.database(&format!("mongo_social_bench_notify_like_{name}"));
        let (store, post) = rt.block_on(async {
            db.drop().await.expect("drop");
            let notifications = notify.then(|| Arc::new(NotificationStore::new(&db)));
            if let Some(notifications) = &notifications {
                notifications.create_indexes().await.expect("indexes");
            }
            let store = feed(&db, notifications);
            store.create_indexes().await.expect("indexes");
            for user in ["ann", "bob"] {
                store
                    .users()
                    .create(NewUser::new(user, user))
                    .await
                    .expect("user");
            }
            let post = store
                .posts()
                .create(NewPost::new("ann", "Hello", "A post to like", ()))
                .await
                .expect("post");
            (store, post.id)
        });
        let like_and_unlike = |store: FeedStore<()>, post: PostId| async move {
            let likes = store.likes();
            likes.like(post, "bob").await.expect("like");
            likes.unlike(post, "bob").await.expect("unlike");
        };
        rt.block_on(like_and_unlike(store.clone(), post));
        let (_, names) = rt.block_on(commands.measure(like_and_unlike(store.clone(), post)));
        eprintln!(
            "notifications {name}: a like and an unlike sent {} commands {names:?}",
            names.len()
        );
        likes.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.to_async(&rt)
                .iter(|| like_and_unlike(store.clone(), post));
        });
    }
    likes.finish();

    let events = bench_env::number("MONGO_SOCIAL_BENCH_EVENTS", 10_000);
    let db = client.database("mongo_social_bench_notify_page");
    let notifications: NotificationStore<()> = NotificationStore::new(&db);
    rt.block_on(async {
        db.drop().await.expect("drop");
        notifications.create_indexes().await.expect("indexes");
        let posts = events.div_ceil(100).max(1);
        let loaded = futures::future::join_all((0..8).map(|worker| {
            let notifications = notifications.clone();
            async move {
                for event in (worker..events).step_by(8) {
                    let activity = Activity::new(
                        "ann",
                        Kind::Like,
                        format!("post{}", event % posts),
                        format!("fan{}", event / posts),
                    );
                    let at = bson::DateTime::from_millis(1_764_547_200_000 + event as i64);
                    notifications
                        .notify(Event::new(activity).at(at))
                        .await
                        .expect("notify");
                }
            }
        }));
        loaded.await;
    });
    let read = || async {
        let page = notifications
            .page("ann", PageRequest::first(20))
            .await
            .expect("page");
        let counts = notifications.counts("ann").await.expect("counts");
        (page.items.len(), counts.unread)
    };
    let ((groups, unread), names) = rt.block_on(commands.measure(read()));
    eprintln!(
        "a page of {groups} groups and the counts ({unread} unread) of a feed of {events} events \
         sent {names:?}"
    );
    let mut pages = c.benchmark_group("notifications/page of 20");
    pages.bench_function(BenchmarkId::from_parameter(events), |b| {
        b.to_async(&rt).iter(read);
    });
    pages.finish();
}
