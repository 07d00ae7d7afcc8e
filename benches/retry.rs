//! What the retry layer costs when nothing fails: the same operations with the default
//! [`RetryPolicy`] and with [`RetryPolicy::never`], in one run on one server, side by side.
//!
//! ```text
//! cargo bench --bench retry                                    # local FerretDB
//! MONGO_SOCIAL_SERVER=mongo-java-server cargo bench --bench retry
//! ```
//!
//! - `retry/bucketed send to 10`: a bucketed send (an update batch, the retried path) to 10
//!   recipients.
//! - `retry/like`: a like (a retried insert and a counter `$inc` carrying its operation id) of a
//!   fresh user, followed by its unlike, so every iteration does the same work.
//!
//! Before timing, one line per (operation, policy) gives the commands it sent: they must be the
//! same with and without retries.

use criterion::BenchmarkId;
use mongo_social::feed::{FeedStore, NewPost, NewUser};
use mongo_social::{retry::RetryPolicy, BucketedFanOut, InboxStore, NewMessage};

#[path = "support/bench_env.rs"]
#[allow(dead_code)] // shared by every bench; this one uses part of it
mod bench_env;

fn policies() -> [(&'static str, RetryPolicy); 2] {
    [
        ("default policy", RetryPolicy::default()),
        ("no retries", RetryPolicy::never()),
    ]
}

fn main() {
    let (rt, client, commands, info) = bench_env::connect();
    eprintln!("server: {}", info.describe());
    let mut c = bench_env::criterion(std::time::Duration::from_secs(3));
    let mut group = c.benchmark_group("retry");

    for (name, policy) in policies() {
        let db = client.database(&format!("mongo_social_bench_retry_send_{}", name.len()));
        let store = rt.block_on(async {
            db.drop().await.expect("drop");
            let store = BucketedFanOut::builder(&db)
                .retry_policy(policy)
                .build()
                .expect("store");
            InboxStore::<String>::create_indexes(&store)
                .await
                .expect("indexes");
            store
        });
        let to: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
        let send = |store: BucketedFanOut<String>, to: Vec<String>| async move {
            store
                .send(NewMessage::new("s", to, "hello".to_owned()))
                .await
                .expect("send")
        };
        rt.block_on(send(store.clone(), to.clone()));
        let (_, names) = rt.block_on(commands.measure(send(store.clone(), to.clone())));
        eprintln!(
            "bucketed send to 10, {name}: {}",
            bench_env::describe(&names)
        );
        group.bench_function(BenchmarkId::new("bucketed send to 10", name), |b| {
            b.to_async(&rt).iter(|| send(store.clone(), to.clone()));
        });
    }

    for (name, policy) in policies() {
        let db = client.database(&format!("mongo_social_bench_retry_like_{}", name.len()));
        let (store, post) = rt.block_on(async {
            db.drop().await.expect("drop");
            let store: FeedStore<()> = FeedStore::builder(&db)
                .retry_policy(policy)
                .build()
                .expect("store");
            store.create_indexes().await.expect("indexes");
            store
                .users()
                .create(NewUser::new("ann", "ann"))
                .await
                .expect("user");
            store
                .users()
                .create(NewUser::new("bob", "bob"))
                .await
                .expect("user");
            let post = store
                .posts()
                .create(NewPost::new("ann", "Title", "Body", ()))
                .await
                .expect("post");
            (store, post.id)
        });
        let like = |store: FeedStore<()>| async move {
            assert!(store.likes().like(post, "bob").await.expect("like"));
            assert!(store.likes().unlike(post, "bob").await.expect("unlike"));
        };
        let (_, names) = rt.block_on(commands.measure(like(store.clone())));
        eprintln!("like and unlike, {name}: {}", bench_env::describe(&names));
        group.bench_function(BenchmarkId::new("like and unlike", name), |b| {
            b.to_async(&rt).iter(|| like(store.clone()));
        });
    }
    group.finish();
    c.final_summary();
}
