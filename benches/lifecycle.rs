//! The inbox lifecycle's read state on a big inbox, per strategy, beside the naive approach (a
//! `read` flag on one document per message, updated one by one).
//!
//! ```text
//! MONGO_SOCIAL_BENCH_LIFECYCLE_M=1000 cargo bench --bench lifecycle   # local FerretDB
//! MONGO_SOCIAL_SERVER=mongo-java-server cargo bench --bench lifecycle
//! MONGODB_URI=mongodb://127.0.0.1:27017/ cargo bench --bench lifecycle
//! ```
//!
//! One inbox of M messages (`MONGO_SOCIAL_BENCH_LIFECYCLE_M`, default 10,000) per subject, each
//! in its own collections of the database `mongo_social_bench_lifecycle` (dropped at the start),
//! filled once before the groups run (bucketed inboxes on servers without atomic updates are
//! loaded in bulk past 1,000 messages, as in `benches/inbox.rs`; see
//! `support/bucket_load.rs`). Groups:
//!
//! - `mark_all_read`: everything read, from all M unread. The library: one
//!   `mark_read_up_to(owner, UpTo::Newest)`; naive: one `update` by `_id` per message (what an
//!   application does with a flag per message and no range update). Before each timed
//!   iteration, untimed, the inbox is made all unread again by writing its layout directly.
//!   Throughput counts the M messages marked.
//! - `unread_count`: the unread count of the all-unread inbox (the worst case for buckets,
//!   whose count sums a counter over the buckets holding unread messages: all of them here).
//!   Naive: `count_documents({owner, read: false})` over an index `{owner, read}`.
//! - `mark_one_read`: one message read (its `mark_unread` untimed between iterations). Naive:
//!   one `update` by `_id`.
//!
//! On FerretDB 1.24 keep M near 1,000: its `update_many` grows faster than linearly (making
//! 10,000 documents unread and marking them read again took 18 minutes), so at 10,000 the
//! `mark_all_read` group takes hours.
//!
//! Before each group, one line per subject gives the commands one operation sent. Criterion
//! defaults here are 10 samples, 1 s warm-up, 3 s measurement; the usual flags override them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use criterion::{BenchmarkId, Throughput};
use futures::{StreamExt, TryStreamExt};
use mongo_social::inbox::{DynInboxLifecycle, UpTo};
use mongo_social::{
    inbox::MessageId, server::ServerInfo, BucketedFanOut, FanOutOnRead, FanOutOnWrite, NewMessage,
    PageRequest,
};
use mongo_social_lab::CommandCounter;
use mongodb::{Collection, Database, IndexModel};

#[path = "support/bench_env.rs"]
#[allow(dead_code)] // shared by every bench; this one uses part of it
mod bench_env;

#[path = "support/bucket_load.rs"]
mod bucket_load;

/// The owner of every inbox here.
const OWNER: &str = "owner";
/// Messages per bucket.
const BUCKET_SIZE: u32 = 50;

/// What is measured: a library strategy, or the naive flag per message.
enum Subject {
    Store {
        name: &'static str,
        store: Arc<DynInboxLifecycle<String>>,
        /// The collection holding the owner's messages, reset directly between iterations.
        raw: Collection<Document>,
    },
    Naive(Collection<Document>),
}

impl Subject {
    fn name(&self) -> &'static str {
        match self {
            Subject::Store { name, .. } => name,
            Subject::Naive(_) => "naive",
        }
    }

    /// Every message of the inbox unread again, written straight into the layout (untimed).
    async fn all_unread(&self) {
        let result = match self {
            Subject::Naive(raw) => raw
                .update_many(doc! { "owner": OWNER }, doc! { "$set": { "read": false } })
                .await
                .map(drop),
            Subject::Store { name, raw, .. } => match *name {
                "fan-out-on-write" => raw
                    .update_many(
                        doc! { "recipient": OWNER },
                        doc! { "$set": { "unread": true } },
                    )
                    .await
                    .map(drop),
                "fan-out-on-read" => raw
                    .update_many(doc! { "to": OWNER }, doc! { "$pull": { "read_by": OWNER } })
                    .await
                    .map(drop),
                _ => buckets_unread(raw).await,
            },
        };
        result.expect("reset to unread");
    }

    /// Marks everything read.
    async fn mark_all_read(&self, ids: &[bson::oid::ObjectId]) {
        match self {
            Subject::Store { store, .. } => store
                .mark_read_up_to(OWNER, UpTo::Newest)
                .await
                .expect("mark all read"),
            Subject::Naive(raw) => {
                for id in ids {
                    raw.update_one(doc! { "_id": id }, doc! { "$set": { "read": true } })
                        .await
                        .expect("mark one");
                }
            }
        }
    }

    async fn unread_count(&self) -> u64 {
        match self {
            Subject::Store { store, .. } => store.unread_count(OWNER).await.expect("count"),
            Subject::Naive(raw) => raw
                .count_documents(doc! { "owner": OWNER, "read": false })
                .await
                .expect("count"),
        }
    }

    async fn mark_one(&self, id: bson::oid::ObjectId, read: bool) {
        match self {
            Subject::Store { store, .. } => {
                let id = MessageId(id);
                let result = if read {
                    store.mark_read(OWNER, id).await
                } else {
                    store.mark_unread(OWNER, id).await
                };
                result.expect("mark one");
            }
            Subject::Naive(raw) => {
                raw.update_one(doc! { "_id": id }, doc! { "$set": { "read": read } })
                    .await
                    .expect("mark one");
            }
        }
    }
}

/// A bucketed inbox all unread: no `read` flag on any entry, `unread` = `count` per bucket.
async fn buckets_unread(raw: &Collection<Document>) -> mongodb::error::Result<()> {
    let buckets: Vec<Document> = raw
        .find(doc! { "owner": OWNER })
        .projection(doc! { "sequence": 1, "count": 1 })
        .await?
        .try_collect()
        .await?;
    let unset = |count: i64| {
        let mut unset = Document::new();
        for i in 0..count {
            unset.insert(format!("messages.{i}.read"), "");
        }
        unset
    };
    let full = i64::from(BUCKET_SIZE);
    raw.update_many(
        doc! { "owner": OWNER, "count": full },
        doc! { "$unset": unset(full), "$set": { "unread": full } },
    )
    .await?;
    for bucket in buckets {
        let count = bucket.get_i64("count").unwrap_or(full);
        if count < full {
            raw.update_one(
                doc! { "owner": OWNER, "sequence": bucket.get("sequence") },
                doc! { "$unset": unset(count), "$set": { "unread": count } },
            )
            .await?;
        }
    }
    Ok(())
}

/// Fills `store`'s inbox of `OWNER` with `m` messages, four sends at a time.
async fn fill(store: &Arc<DynInboxLifecycle<String>>, m: u64) {
    futures::stream::iter(0..m)
        .map(|i| {
            let store = Arc::clone(store);
            async move {
                store
                    .send(NewMessage::new(
                        format!("sender{}", i % 8),
                        [OWNER],
                        format!("message {i}"),
                    ))
                    .await
                    .map(drop)
            }
        })
        .buffer_unordered(4)
        .try_collect::<Vec<()>>()
        .await
        .expect("fill");
}

/// The subjects, each with an inbox of `m` messages, and the naive inbox's ids.
async fn subjects(
    db: &Database,
    info: &ServerInfo,
    m: u64,
) -> (Vec<Subject>, Vec<bson::oid::ObjectId>) {
    let read: Arc<DynInboxLifecycle<String>> = Arc::new(
        FanOutOnRead::builder(db)
            .collection_prefix("read_")
            .build()
            .expect("store"),
    );
    let write: Arc<DynInboxLifecycle<String>> = Arc::new(
        FanOutOnWrite::builder(db)
            .collection_prefix("write_")
            .build()
            .expect("store"),
    );
    let buckets: Arc<DynInboxLifecycle<String>> = Arc::new(
        BucketedFanOut::builder(db)
            .collection_prefix("buckets_")
            .bucket_size(BUCKET_SIZE)
            .build()
            .expect("store"),
    );
    let started = Instant::now();
    for store in [&read, &write, &buckets] {
        store.create_indexes().await.expect("indexes");
    }
    fill(&read, m).await;
    fill(&write, m).await;
    if bucket_load::fill_through_send(m, info.capabilities().atomic_updates) {
        fill(&buckets, m).await;
    } else {
        let messages: Vec<(String, String)> = (0..m - 1)
            .map(|i| (format!("sender{}", i % 8), format!("message {i}")))
            .collect();
        bucket_load::load_buckets(
            db,
            "buckets_inbox_buckets",
            "buckets_inbox_heads",
            BUCKET_SIZE,
            OWNER,
            &messages,
        )
        .await
        .expect("load buckets");
        fill(&buckets, 1).await;
    }
    let naive = db.collection::<Document>("naive_inbox");
    naive
        .create_index(
            IndexModel::builder()
                .keys(doc! { "owner": 1, "read": 1 })
                .build(),
        )
        .await
        .expect("index");
    let ids: Vec<bson::oid::ObjectId> = (0..m).map(|_| bson::oid::ObjectId::new()).collect();
    let documents = ids.iter().enumerate().map(|(i, id)| {
        doc! {
            "_id": id, "owner": OWNER, "from": format!("sender{}", i % 8),
            "sent": bson::DateTime::now(), "message": format!("message {i}"), "read": false,
        }
    });
    naive.insert_many(documents).await.expect("naive inbox");
    for store in [&read, &write, &buckets] {
        assert_eq!(store.count(OWNER).await.expect("count"), m);
    }
    eprintln!(
        "filled four inboxes of {m} messages in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let subjects = vec![
        Subject::Store {
            name: "fan-out-on-read",
            store: read,
            raw: db.collection("read_inbox"),
        },
        Subject::Store {
            name: "fan-out-on-write",
            store: write,
            raw: db.collection("write_inbox_copies"),
        },
        Subject::Store {
            name: "bucketed-fan-out",
            store: buckets,
            raw: db.collection("buckets_inbox_buckets"),
        },
        Subject::Naive(naive),
    ];
    (subjects, ids)
}

/// The newest message of a subject's inbox, to mark one.
async fn newest(subject: &Subject, ids: &[bson::oid::ObjectId]) -> bson::oid::ObjectId {
    match subject {
        Subject::Store { store, .. } => {
            store
                .inbox_page(OWNER, PageRequest::first(1))
                .await
                .expect("page")
                .items[0]
                .id
                .0
        }
        Subject::Naive(_) => ids[ids.len() - 1],
    }
}

fn main() {
    let m = bench_env::number("MONGO_SOCIAL_BENCH_LIFECYCLE_M", 10_000) as u64;
    let groups = bench_env::groups();
    let (rt, client, commands, info) = bench_env::connect();
    eprintln!("server: {}", info.describe());
    let db = client.database("mongo_social_bench_lifecycle");
    rt.block_on(async { db.drop().await }).expect("drop");
    let (subjects, ids) = rt.block_on(subjects(&db, &info, m));
    let mut criterion = bench_env::criterion(Duration::from_secs(3));
    let counted = |label: &str, subject: &Subject, commands: &CommandCounter| {
        eprintln!(
            "{label}: {} {}",
            subject.name(),
            bench_env::describe(&commands.names())
        );
    };

    if bench_env::runs(&groups, "mark_all_read") {
        for subject in &subjects {
            rt.block_on(subject.all_unread());
            commands.reset();
            rt.block_on(subject.mark_all_read(&ids));
            counted("mark_all_read", subject, &commands);
            assert_eq!(rt.block_on(subject.unread_count()), 0, "{}", subject.name());
        }
        let mut group = criterion.benchmark_group("mark_all_read");
        group.throughput(Throughput::Elements(m));
        for subject in &subjects {
            group.bench_function(BenchmarkId::new(subject.name(), m), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let ids = &ids;
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            subject.all_unread().await;
                            let start = Instant::now();
                            subject.mark_all_read(ids).await;
                            total += start.elapsed();
                        }
                        total
                    }
                });
            });
        }
        group.finish();
    }

    if bench_env::runs(&groups, "unread_count") {
        for subject in &subjects {
            rt.block_on(subject.all_unread());
            commands.reset();
            let unread = rt.block_on(subject.unread_count());
            counted("unread_count", subject, &commands);
            assert_eq!(unread, m, "{}", subject.name());
        }
        let mut group = criterion.benchmark_group("unread_count");
        for subject in &subjects {
            group.bench_function(BenchmarkId::new(subject.name(), m), |b| {
                b.to_async(&rt).iter(|| subject.unread_count());
            });
        }
        group.finish();
    }

    if bench_env::runs(&groups, "mark_one_read") {
        let mut group = criterion.benchmark_group("mark_one_read");
        for subject in &subjects {
            let id = rt.block_on(newest(subject, &ids));
            rt.block_on(subject.all_unread());
            commands.reset();
            rt.block_on(subject.mark_one(id, true));
            counted("mark_one_read", subject, &commands);
            group.bench_function(BenchmarkId::new(subject.name(), m), |b| {
                b.to_async(&rt).iter_custom(|iters| async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        subject.mark_one(id, false).await;
                        let start = Instant::now();
                        subject.mark_one(id, true).await;
                        total += start.elapsed();
                    }
                    total
                });
            });
        }
        group.finish();
    }
    criterion.final_summary();
}
