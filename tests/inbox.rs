//! The inbox conformance suite, run against every strategy on the real server, plus each
//! strategy's own checks.

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongo_social::inbox::{InboxLifecycle, UpTo};
use mongo_social::{
    inbox::MessageId, retry::RetryPolicy, BucketedFanOut, DynInboxStore, Error, FanOutOnRead,
    FanOutOnWrite, InboxStore, NewMessage, PageRequest,
};
use mongo_social_lab::inbox_suite::{self, Note};
use mongo_social_lab::{self as testing, TestDb};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};

fn fan_out_on_read(db: &Database) -> Arc<DynInboxStore<Note>> {
    fan_out_on_read_with(db, RetryPolicy::default())
}

fn fan_out_on_read_with(db: &Database, retry: RetryPolicy) -> Arc<DynInboxStore<Note>> {
    Arc::new(
        FanOutOnRead::builder(db)
            .retry_policy(retry)
            .build()
            .unwrap(),
    )
}

fn fan_out_on_write(db: &Database) -> Arc<DynInboxStore<Note>> {
    fan_out_on_write_with(db, RetryPolicy::default())
}

fn fan_out_on_write_with(db: &Database, retry: RetryPolicy) -> Arc<DynInboxStore<Note>> {
    Arc::new(
        FanOutOnWrite::builder(db)
            .retry_policy(retry)
            .build()
            .unwrap(),
    )
}

fn bucketed(db: &Database) -> Arc<DynInboxStore<Note>> {
    bucketed_with(db, RetryPolicy::default())
}

fn bucketed_with(db: &Database, retry: RetryPolicy) -> Arc<DynInboxStore<Note>> {
    Arc::new(
        BucketedFanOut::builder(db)
            .retry_policy(retry)
            .build()
            .unwrap(),
    )
}

/// A client for a port where nothing listens, giving up after one second.
async fn unreachable_database() -> Database {
    let mut options = ClientOptions::parse("mongodb://127.0.0.1:1/")
        .await
        .unwrap();
    options.server_selection_timeout = Some(Duration::from_secs(1));
    Client::with_options(options)
        .unwrap()
        .database("unreachable")
}

/// Runs each suite check against one strategy, each in a fresh database.
macro_rules! conformance {
    ($strategy:ident, $with_retry:ident) => {
        mod $strategy {
            use super::*;

            async fn store(test: &str) -> (TestDb, Arc<DynInboxStore<Note>>) {
                let db = testing::test_db(&format!("{}_{test}", stringify!($strategy))).await;
                let store = super::$strategy(&db.db);
                store.set_up().await.expect("create indexes");
                (db, store)
            }

            #[tokio::test]
            async fn newest_first() {
                let (_db, store) = store("newest_first").await;
                inbox_suite::newest_first(&*store).await;
            }

            #[tokio::test]
            async fn empty_inbox() {
                let (_db, store) = store("empty_inbox").await;
                inbox_suite::empty_inbox(&*store).await;
            }

            #[tokio::test]
            async fn group_message() {
                let (_db, store) = store("group_message").await;
                inbox_suite::group_message(&*store).await;
            }

            #[tokio::test]
            async fn counts() {
                let (_db, store) = store("counts").await;
                inbox_suite::counts(&*store).await;
            }

            #[tokio::test]
            async fn complete_pagination() {
                let (_db, store) = store("complete_pagination").await;
                inbox_suite::complete_pagination(&*store).await;
            }

            #[tokio::test]
            async fn pagination_while_messages_arrive() {
                let (_db, store) = store("pagination_arrivals").await;
                inbox_suite::pagination_while_messages_arrive(&*store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn large_inbox() {
                let (db, store) = store("large_inbox").await;
                let volume = inbox_suite::Volume::for_server(&db.info, store.strategy());
                inbox_suite::large_inbox(store, volume).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn concurrent_senders() {
                let (db, store) = store("concurrent_senders").await;
                let volume = inbox_suite::Volume::for_server(&db.info, store.strategy());
                inbox_suite::concurrent_senders(store, volume).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sent_order_under_concurrency() {
                let (_db, store) = store("sent_order").await;
                inbox_suite::sent_order_under_concurrency(store, 16, 10).await;
            }

            #[tokio::test]
            async fn command_counts() {
                let (db, store) = store("command_counts").await;
                inbox_suite::command_counts(&*store, &db.commands).await;
            }

            #[tokio::test]
            async fn bad_input() {
                let (_db, store) = store("bad_input").await;
                inbox_suite::bad_input(&*store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn deliver_is_idempotent() {
                let (_db, store) = store("deliver_idempotent").await;
                inbox_suite::deliver_is_idempotent(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn survives_outage() {
                let name = concat!(stringify!($strategy), "_survives_outage");
                let db = testing::test_db(name).await; // fresh, empty
                let proxy = testing::fault_proxy();
                let client = proxy.client_with(|_| {}).await;
                let store = super::$strategy(&client.database(db.db.name()));
                let impatient = proxy.impatient_client().await.database(db.db.name());
                let impatient = super::$with_retry(&impatient, testing::impatient_retry());
                store.set_up().await.expect("create indexes");
                inbox_suite::survives_outage(store, impatient, &proxy).await;
            }

            #[tokio::test]
            async fn reopen() {
                let db = testing::test_db(&format!("{}_reopen", stringify!($strategy))).await;
                let first = super::$strategy(&db.db);
                let second = super::$strategy(&db.db);
                inbox_suite::reopen(&*first, &*second).await;
            }

            #[tokio::test]
            async fn without_create_indexes() {
                let db = testing::test_db(&format!("{}_no_indexes", stringify!($strategy))).await;
                inbox_suite::without_create_indexes(&*super::$strategy(&db.db)).await;
            }

            #[tokio::test]
            async fn unreachable_server() {
                let store = super::$strategy(&unreachable_database().await);
                let sent = store
                    .send(NewMessage::new("joe", ["bob"], Note::new("joe", 0)))
                    .await;
                // Reported as the outage it is, whatever was retried on the way.
                assert!(matches!(sent, Err(Error::Unreachable { .. })), "{sent:?}");
                let page = store.inbox_page("bob", PageRequest::first(5)).await;
                assert!(matches!(page, Err(Error::Unreachable { .. })), "{page:?}");
            }
        }
    };
}

conformance!(fan_out_on_read, fan_out_on_read_with);
conformance!(fan_out_on_write, fan_out_on_write_with);
conformance!(bucketed, bucketed_with);

/// The store is usable as `Arc<dyn InboxStore>` chosen at runtime, and reports its strategy.
#[tokio::test]
async fn strategies_switch_at_runtime() {
    let db = testing::test_db("strategies_switch_at_runtime").await;
    let stores: Vec<Arc<DynInboxStore<String>>> = vec![
        Arc::new(FanOutOnRead::new(&db.db)),
        Arc::new(FanOutOnWrite::new(&db.db)),
        Arc::new(BucketedFanOut::new(&db.db)),
    ];
    for store in &stores {
        store.set_up().await.expect("indexes");
        store
            .send(NewMessage::new(
                "joe",
                ["bob"],
                format!("via {}", store.strategy()),
            ))
            .await
            .expect("send");
        let page = store
            .inbox_page("bob", PageRequest::first(5))
            .await
            .expect("page");
        assert_eq!(page.items.len(), 1, "{}", store.strategy());
        assert_eq!(page.items[0].payload, format!("via {}", store.strategy()));
    }
}

/// A cursor of one strategy is refused by the others (`Invalid::Cursor`), as the README promises.
#[tokio::test]
async fn cursors_of_other_strategies_are_refused() {
    let db = testing::test_db("foreign_cursors").await;
    let stores = [
        fan_out_on_read(&db.db),
        fan_out_on_write(&db.db),
        bucketed(&db.db),
    ];
    for store in &stores {
        store.set_up().await.expect("indexes");
    }
    inbox_suite::foreign_cursors(&stores).await;
}

/// Used before `create_indexes`, buckets stay exact (the reported case: five sends into
/// buckets of 2 gave a count of 2 and the order m1, m0, m3, m2, m4): a bucket's `_id` is derived
/// from its owner and sequence, so `_id`'s own uniqueness keeps a bucket from being opened twice,
/// with no index of the store's.
#[tokio::test]
async fn buckets_used_before_create_indexes_stay_exact() {
    let db = testing::test_db("buckets_before_indexes").await;
    let store = BucketedFanOut::builder(&db.db)
        .bucket_size(2)
        .build()
        .unwrap();
    let mut sent = inbox_suite::send_sequence(&store, "joe", &["bob"], 5).await;
    assert_eq!(store.count("bob").await.unwrap(), 5);
    sent.reverse();
    assert_eq!(inbox_suite::read_all(&store, "bob", 10).await, sent);
    let sizes: Vec<usize> = bucket_sizes(&db, "bob").await.iter().map(|b| b.1).collect();
    assert_eq!(sizes, [2, 2, 1]);
    let ids: Vec<String> = db
        .collection::<Document>("inbox_buckets")
        .find(doc! { "owner": "bob" })
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|bucket| bucket.get_str("_id").unwrap().to_owned())
        .collect();
    // "bob" in hex, then the sequence in 12 digits.
    assert_eq!(
        ids,
        [
            "626f62.000000000000",
            "626f62.000000000001",
            "626f62.000000000002"
        ]
    );
}

#[tokio::test]
async fn bucket_size_is_validated() {
    let db = testing::test_db("bucket_size_is_validated").await;
    for size in [0, mongo_social::inbox::MAX_BUCKET_SIZE + 1] {
        let built = BucketedFanOut::<Note>::builder(&db.db)
            .bucket_size(size)
            .build();
        assert!(
            matches!(built, Err(Error::InvalidConfig { .. })),
            "size {size}"
        );
    }
    let same = BucketedFanOut::<Note>::builder(&db.db)
        .collection("inbox_heads", "inbox_buckets")
        .build();
    assert!(matches!(same, Err(Error::InvalidConfig { .. })));
    assert!(matches!(
        FanOutOnWrite::<Note>::builder(&db.db)
            .collection("inbox_copies", "")
            .build(),
        Err(Error::InvalidConfig { .. })
    ));
    assert!(BucketedFanOut::<Note>::builder(&db.db)
        .bucket_size(1)
        .build()
        .is_ok());
}

async fn bucket_sizes(db: &TestDb, owner: &str) -> Vec<(i64, usize, i64)> {
    let buckets: Vec<Document> = db
        .collection::<Document>("inbox_buckets")
        .find(doc! { "owner": owner })
        .sort(doc! { "sequence": 1 })
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("buckets");
    buckets
        .iter()
        .map(|b| {
            (
                b.get_i64("sequence")
                    .or_else(|_| b.get_i32("sequence").map(i64::from))
                    .unwrap(),
                b.get_array("messages").unwrap().len(),
                b.get_i64("count").unwrap(),
            )
        })
        .collect()
}

/// Under concurrent senders no bucket passes its size, every bucket but the newest is full,
/// and sequences have no holes: what makes positions, counts and pages exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn buckets_never_overfill_under_concurrency() {
    let db = testing::test_db("buckets_never_overfill").await;
    let size = 7;
    let store = Arc::new(
        BucketedFanOut::builder(&db.db)
            .bucket_size(size)
            .build()
            .unwrap(),
    );
    store.set_up().await.unwrap();
    let tasks = (0..8).map(|s| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let from = format!("s{s}");
            for seq in 0..40 {
                let to = ["hub", if seq % 2 == 0 { "even" } else { "odd" }];
                store
                    .send(NewMessage::new(from.as_str(), to, Note::new(&from, seq)))
                    .await
                    .unwrap();
            }
        })
    });
    for task in tasks {
        task.await.unwrap();
    }
    for (owner, expected) in [("hub", 320), ("even", 160), ("odd", 160)] {
        let buckets = bucket_sizes(&db, owner).await;
        let total: usize = buckets.iter().map(|b| b.1).sum();
        assert_eq!(total, expected, "{owner}");
        for (i, (sequence, len, count)) in buckets.iter().enumerate() {
            assert_eq!(*sequence, i as i64, "{owner}: sequence hole");
            assert_eq!(
                *len as i64, *count,
                "{owner}: count disagrees with contents"
            );
            assert!(
                *len <= size as usize,
                "{owner}: bucket {sequence} holds {len}"
            );
            if i + 1 < buckets.len() {
                assert_eq!(
                    *len, size as usize,
                    "{owner}: older bucket {sequence} not full"
                );
            }
        }
        assert_eq!(store.count(owner).await.unwrap(), expected as u64);
    }
}

/// The seed's off-by-one is gone: the first bucket holds exactly `bucket_size` messages.
#[tokio::test]
async fn first_bucket_holds_exactly_bucket_size() {
    let db = testing::test_db("first_bucket_exact").await;
    let store = BucketedFanOut::new(&db.db);
    store.set_up().await.unwrap();
    inbox_suite::send_sequence(&store, "joe", &["bob"], 101).await;
    assert_eq!(
        bucket_sizes(&db, "bob")
            .await
            .iter()
            .map(|b| b.1)
            .collect::<Vec<_>>(),
        [50, 50, 1]
    );
}

/// The largest message each strategy accepts is stored; one byte more is refused.
#[tokio::test]
async fn bucketed_message_limit_is_exact_and_typed() {
    let db = testing::test_db("bucketed_message_limit").await;
    let store = BucketedFanOut::builder(&db.db)
        .bucket_size(50)
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    let limit = store.max_message_bytes();
    let too_big = "x".repeat(limit);
    let refused = store.send(NewMessage::new("joe", ["bob"], too_big)).await;
    assert!(
        matches!(refused, Err(Error::InvalidInput { reason: Invalid::TooLarge { what: "message", limit: l, .. }, .. }) if l == limit)
    );
    let fits = "x".repeat(limit - 200);
    for _ in 0..3 {
        store
            .send(NewMessage::new("joe", ["bob"], fits.clone()))
            .await
            .expect("fits");
    }
    assert_eq!(store.count("bob").await.unwrap(), 3);
}

/// Outside a sharded cluster, sharding is refused with a typed error rather than faked.
#[tokio::test]
async fn sharding_needs_mongos() {
    let db = testing::test_db("sharding_needs_mongos").await;
    let store = BucketedFanOut::<Note>::new(&db.db);
    let keys = store.shard_keys();
    assert_eq!(keys.len(), 3);
    assert_eq!(keys[0].key, doc! { "owner": 1, "sequence": 1 });
    assert_eq!(keys[2].collection, "inbox_recipients");
    assert_eq!(keys[2].key, doc! { "_id": "hashed" });
    assert_eq!(
        FanOutOnRead::<Note>::new(&db.db).shard_keys()[0].key,
        doc! { "from": 1 }
    );
    assert_eq!(
        FanOutOnWrite::<Note>::new(&db.db).shard_keys()[0].key,
        doc! { "recipient": 1, "sent": 1 }
    );
    let result = store.shard_collections().await;
    if db.info.capabilities().sharding {
        result.expect("sharding through mongos");
    } else {
        assert!(
            matches!(
                result,
                Err(Error::Unsupported {
                    feature: "sharding",
                    ..
                })
            ),
            "{result:?}"
        );
    }
}

/// A heads document that lags far behind (lost, or never written) costs a resync, not an error.
#[tokio::test]
async fn lagging_head_is_resynchronised() {
    let db = testing::test_db("lagging_head_is_resynchronised").await;
    let store = BucketedFanOut::builder(&db.db)
        .bucket_size(2)
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    let mut sent = inbox_suite::send_sequence(&store, "joe", &["bob"], 80).await;
    db.collection::<Document>("inbox_heads")
        .delete_many(doc! {})
        .await
        .unwrap();
    sent.extend(inbox_suite::send_sequence(&store, "ann", &["bob"], 1).await);
    assert_eq!(store.count("bob").await.unwrap(), 81);
    sent.reverse();
    let read = inbox_suite::read_all(&store, "bob", 25).await;
    assert_eq!(read, sent);
    let buckets = bucket_sizes(&db, "bob").await;
    assert_eq!(buckets.len(), 41);
    assert_eq!(buckets[40], (40, 1, 1));
}

/// An owner's buckets are one range of `_id`: owners whose names are prefixes of one another or
/// hold the characters around the separator (`.`, `/`) never read, count or fill each other's
/// buckets.
#[tokio::test]
async fn owners_whose_names_nest_keep_their_buckets_apart() {
    let db = testing::test_db("buckets_nested_owners").await;
    let store = BucketedFanOut::builder(&db.db)
        .bucket_size(2)
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    let owners = [
        "b",
        "bo",
        "bob",
        "bob.",
        "bob/",
        "bob.0",
        "bob0",
        "bob/000000000001",
    ];
    let mut expected = HashMap::new();
    for (i, owner) in owners.iter().enumerate() {
        let mut sent = inbox_suite::send_sequence(&store, "joe", &[owner], i as u32 + 1).await;
        sent.reverse();
        expected.insert(*owner, sent);
    }
    for owner in owners {
        let sent = &expected[owner];
        assert_eq!(
            store.count(owner).await.unwrap(),
            sent.len() as u64,
            "{owner}"
        );
        assert_eq!(
            &inbox_suite::read_all(&store, owner, 3).await,
            sent,
            "{owner}"
        );
        let sizes: Vec<usize> = bucket_sizes(&db, owner).await.iter().map(|b| b.1).collect();
        assert_eq!(sizes.iter().sum::<usize>(), sent.len(), "{owner}");
        assert!(sizes.iter().all(|size| *size <= 2), "{owner}: {sizes:?}");
        assert_eq!(
            store.unread_count(owner).await.unwrap(),
            sent.len() as u64,
            "{owner}"
        );
    }
    store.mark_read_up_to("bob", UpTo::Newest).await.unwrap();
    for owner in owners {
        let unread = if owner == "bob" {
            0
        } else {
            expected[owner].len() as u64
        };
        assert_eq!(store.unread_count(owner).await.unwrap(), unread, "{owner}");
    }
}

/// Where updates are not atomic, recipients are locked around delivery; a lock left by a sender
/// that died is taken over once its lease has run out, and nothing is lost.
#[tokio::test]
async fn expired_recipient_lock_is_taken_over() {
    let db = testing::test_db("expired_recipient_lock").await;
    if testing::skip_unless(
        !db.info.capabilities().atomic_updates,
        "expired_recipient_lock_is_taken_over",
        "recipient locks are used only on servers whose updates are not atomic",
    ) {
        return;
    }
    let store = BucketedFanOut::new(&db.db);
    store.set_up().await.unwrap();
    let long_ago = bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 60_000);
    db.collection::<Document>("inbox_locks")
        .insert_one(doc! { "_id": "bob", "token": bson::oid::ObjectId::new(), "expires": long_ago })
        .await
        .unwrap();
    let sent = store
        .send(NewMessage::new("joe", ["bob", "ann"], Note::new("joe", 0)))
        .await
        .expect("send past an expired lock")
        .message;
    for owner in ["bob", "ann"] {
        let page = store
            .inbox_page(owner, PageRequest::first(5))
            .await
            .unwrap();
        assert_eq!(page.items, std::slice::from_ref(&sent), "{owner}");
    }
    let locks = db
        .collection::<Document>("inbox_locks")
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(locks, 0, "locks left behind");
}

/// Every message entry stored in `collection`: its documents, or the `messages` of its buckets.
async fn stored_entries(db: &TestDb, collection: &str) -> Vec<Document> {
    let documents: Vec<Document> = db
        .collection::<Document>(collection)
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    documents
        .into_iter()
        .flat_map(|document| match document.get_array("messages") {
            Ok(messages) => messages
                .iter()
                .filter_map(|m| m.as_document().cloned())
                .collect(),
            Err(_) => vec![document],
        })
        .collect()
}

/// A message to more recipients than a store keeps in every entry stores its list once; pages
/// give the whole list back, with one more `find` only for pages that hold such messages, and a
/// repeated delivery stores nothing twice. `send_inserts`: the `insert`s a send of the long
/// message takes, where they are exact (no locks).
async fn long_recipient_lists_are_stored_once(
    db: &TestDb,
    store: &DynInboxStore<String>,
    entries: &str,
    send_inserts: Option<usize>,
    every_send_recorded: bool,
) {
    store.set_up().await.expect("indexes");
    let group: Vec<String> = (0..5).map(|i| format!("member{i}")).collect();
    let pair = ["member0", "member1"];
    let short = store
        .send(NewMessage::new("joe", pair, "to two".to_owned()))
        .await
        .expect("send to two")
        .message;
    db.commands.reset();
    let long = store
        .send(NewMessage::new("joe", group.clone(), "to five".to_owned()))
        .await
        .expect("send to five")
        .message;
    if let Some(inserts) = send_inserts {
        assert_eq!(
            db.commands.count("insert"),
            inserts,
            "{:?}",
            db.commands.names()
        );
    }

    let lists = stored_entries(db, "inbox_recipients").await;
    assert_eq!(
        lists.len(),
        if every_send_recorded { 2 } else { 1 },
        "one list, for the long message only, or one record per message: {lists:?}"
    );
    let list = lists
        .iter()
        .find(|list| list.get_object_id("_id").unwrap() == long.id.0)
        .expect("the long message's list");
    let listed: Vec<&str> = list
        .get_array("to")
        .unwrap()
        .iter()
        .filter_map(|name| name.as_str())
        .collect();
    assert_eq!(listed, group);
    let stored = stored_entries(db, entries).await;
    let (long_entries, short_entries): (Vec<&Document>, Vec<&Document>) = stored
        .iter()
        .partition(|entry| entry.get_object_id("id").unwrap() == long.id.0);
    assert_eq!(long_entries.len(), 5);
    for entry in long_entries {
        assert!(!entry.contains_key("to"), "{entry:?}");
        assert_eq!(entry.get_i64("to_count").unwrap(), 5, "{entry:?}");
    }
    assert_eq!(short_entries.len(), 2);
    for entry in short_entries {
        assert_eq!(entry.get_array("to").unwrap().len(), 2, "{entry:?}");
    }

    for member in &group {
        db.commands.reset();
        let page = store
            .inbox_page(member, PageRequest::first(10))
            .await
            .expect("page");
        assert_eq!(
            db.commands.count("find"),
            2,
            "the page and its lists: {:?}",
            db.commands.names()
        );
        assert_eq!(page.items[0].id, long.id);
        assert_eq!(page.items[0].to, group, "{member}");
        if pair.contains(&member.as_str()) {
            assert_eq!(page.items.len(), 2, "{member}");
            assert_eq!(page.items[1].id, short.id);
            assert_eq!(page.items[1].to, pair, "{member}");
        } else {
            assert_eq!(page.items.len(), 1, "{member}");
        }
    }
    // A page without long lists takes one `find`.
    let newest = store
        .inbox_page("member0", PageRequest::first(1))
        .await
        .unwrap();
    db.commands.reset();
    let older = store
        .inbox_page("member0", PageRequest::after(1, newest.next.unwrap()))
        .await
        .unwrap();
    assert_eq!(db.commands.names(), ["find"]);
    assert_eq!(older.items[0].to, pair);

    // Delivering the long message again writes no second list and no second entry.
    store.deliver(&long, &group).await.expect("deliver again");
    assert_eq!(
        stored_entries(db, "inbox_recipients").await.len(),
        if every_send_recorded { 2 } else { 1 }
    );
    assert_eq!(stored_entries(db, entries).await.len(), 7);
}

#[tokio::test]
async fn fan_out_on_write_stores_long_recipient_lists_once() {
    let db = testing::test_db("fan_out_on_write_long_lists").await;
    let store = FanOutOnWrite::builder(&db.db)
        .max_inline_recipients(2)
        .build()
        .unwrap();
    // The list, then the copies.
    long_recipient_lists_are_stored_once(&db, &store, "inbox_copies", Some(2), false).await;
}

#[tokio::test]
async fn buckets_store_long_recipient_lists_once() {
    let db = testing::test_db("buckets_long_lists").await;
    let store = BucketedFanOut::builder(&db.db)
        .max_inline_recipients(2)
        .build()
        .unwrap();
    // The record is an upsert and the entries are pushes: no `insert` (without atomic updates,
    // the recipient locks are inserted too).
    let inserts = db.info.capabilities().atomic_updates.then_some(0);
    long_recipient_lists_are_stored_once(&db, &store, "inbox_buckets", inserts, true).await;
}

/// By default a recipient list rides in every entry up to 16 names, on every server; a longer
/// one is stored once, and pages give every list back whole either way.
async fn default_inline_limit_is_sixteen(
    db: &TestDb,
    store: &DynInboxStore<String>,
    entries: &str,
    every_send_recorded: bool,
) {
    store.set_up().await.expect("indexes");
    let members = |n: usize| -> Vec<String> { (0..n).map(|i| format!("member{i}")).collect() };
    let to_sixteen = store
        .send(NewMessage::new("joe", members(16), "to 16".to_owned()))
        .await
        .expect("send to 16")
        .message;
    let to_more = store
        .send(NewMessage::new("joe", members(17), "to 17".to_owned()))
        .await
        .expect("send to 17")
        .message;

    let mut lists: Vec<ObjectId> = stored_entries(db, "inbox_recipients")
        .await
        .iter()
        .map(|list| list.get_object_id("_id").unwrap())
        .collect();
    lists.sort();
    let mut expected = vec![to_more.id.0];
    if every_send_recorded {
        expected.insert(0, to_sixteen.id.0);
    }
    assert_eq!(lists, expected);
    let inline: Vec<usize> = stored_entries(db, entries)
        .await
        .iter()
        .filter_map(|entry| Some(entry.get_array("to").ok()?.len()))
        .collect();
    assert_eq!(inline, [16; 16]);

    let page = store
        .inbox_page("member0", PageRequest::first(10))
        .await
        .expect("page");
    let ids: Vec<MessageId> = page.items.iter().map(|message| message.id).collect();
    assert_eq!(ids, [to_more.id, to_sixteen.id]);
    assert_eq!(page.items[0].to, members(17));
    assert_eq!(page.items[1].to, members(16));
}

#[tokio::test]
async fn fan_out_on_write_inline_limit_is_sixteen() {
    let db = testing::test_db("fan_out_on_write_inline_default").await;
    let store = FanOutOnWrite::new(&db.db);
    default_inline_limit_is_sixteen(&db, &store, "inbox_copies", false).await;
}

#[tokio::test]
async fn buckets_inline_limit_is_sixteen() {
    let db = testing::test_db("buckets_inline_default").await;
    let store = BucketedFanOut::new(&db.db);
    default_inline_limit_is_sixteen(&db, &store, "inbox_buckets", true).await;
}

#[tokio::test]
async fn recipient_lists_need_their_own_collection() {
    let db = testing::test_db("recipient_lists_collection").await;
    let refused = FanOutOnWrite::<Note>::builder(&db.db)
        .collection("inbox_recipients", "inbox_copies")
        .build();
    assert!(
        matches!(refused, Err(Error::InvalidConfig { .. })),
        "{refused:?}"
    );
    let refused = BucketedFanOut::<Note>::builder(&db.db)
        .collection("inbox_recipients", "inbox_heads")
        .build();
    assert!(
        matches!(refused, Err(Error::InvalidConfig { .. })),
        "{refused:?}"
    );
}

/// The inbox lifecycle suite (`testing::lifecycle_suite`), run against every strategy, each
/// check in a fresh database.
mod lifecycle {
    use mongo_social::inbox::{DynInboxLifecycle, Retention};
    use mongo_social_lab::lifecycle_suite;

    use super::*;

    fn fan_out_on_read(db: &Database, retention: Retention) -> Arc<DynInboxLifecycle<Note>> {
        Arc::new(
            FanOutOnRead::builder(db)
                .retention(retention)
                .collection_prefix(prefix(retention))
                .build()
                .unwrap(),
        )
    }

    fn fan_out_on_write(db: &Database, retention: Retention) -> Arc<DynInboxLifecycle<Note>> {
        Arc::new(
            FanOutOnWrite::builder(db)
                .retention(retention)
                .collection_prefix(prefix(retention))
                .build()
                .unwrap(),
        )
    }

    fn bucketed(db: &Database, retention: Retention) -> Arc<DynInboxLifecycle<Note>> {
        Arc::new(
            BucketedFanOut::builder(db)
                .retention(retention)
                .collection_prefix(prefix(retention))
                .build()
                .unwrap(),
        )
    }

    /// Stores of different retention in one database keep apart.
    fn prefix(retention: Retention) -> &'static str {
        match (retention.newest(), retention.age()) {
            (None, None) => "",
            (Some(_), _) => "keep_",
            (None, Some(_)) => "aged_",
        }
    }

    macro_rules! lifecycle {
        ($strategy:ident) => {
            mod $strategy {
                use super::*;

                async fn store(test: &str) -> (TestDb, Arc<DynInboxLifecycle<Note>>) {
                    let name = format!("lc_{}_{test}", stringify!($strategy));
                    let db = testing::test_db(&name).await;
                    let store = super::$strategy(&db.db, Retention::default());
                    store.set_up().await.expect("create indexes");
                    (db, store)
                }

                #[tokio::test]
                async fn read_state() {
                    let (_db, store) = store("read_state").await;
                    lifecycle_suite::read_state(&*store).await;
                }

                #[tokio::test]
                async fn delete_for_me() {
                    let (_db, store) = store("delete_for_me").await;
                    lifecycle_suite::delete_for_me(&*store).await;
                }

                #[tokio::test]
                async fn retract_and_edit() {
                    let (_db, store) = store("retract_and_edit").await;
                    lifecycle_suite::retract_and_edit(&*store).await;
                }

                #[tokio::test]
                async fn mute_and_block() {
                    let (_db, store) = store("mute_and_block").await;
                    lifecycle_suite::mute_and_block(&*store).await;
                }

                #[tokio::test]
                async fn retention() {
                    let db =
                        testing::test_db(&format!("lc_{}_retention", stringify!($strategy))).await;
                    let keep = super::$strategy(&db.db, Retention::keep_newest(60));
                    let aged = super::$strategy(
                        &db.db,
                        Retention::default().max_age(Duration::from_secs(24 * 3600)),
                    );
                    keep.set_up().await.expect("indexes");
                    aged.set_up().await.expect("indexes");
                    lifecycle_suite::retention(&*keep, &*aged, &db.commands).await;
                }

                #[tokio::test]
                async fn bad_input() {
                    let (db, store) = store("bad_input").await;
                    lifecycle_suite::bad_input(&*store, &db).await;
                }

                #[tokio::test]
                async fn command_counts() {
                    let (db, store) = store("command_counts").await;
                    lifecycle_suite::command_counts(&*store, &db.commands).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn concurrent_lifecycle() {
                    let (db, store) = store("concurrent").await;
                    let per_sender = lifecycle_suite::concurrent_volume(&db.info, store.strategy());
                    lifecycle_suite::concurrent_lifecycle(store, per_sender).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn survives_outage() {
                    let name = concat!("lc_", stringify!($strategy), "_outage");
                    let db = testing::test_db(name).await;
                    let proxy = testing::fault_proxy();
                    let client = proxy.client_with(|_| {}).await;
                    let store =
                        super::$strategy(&client.database(db.db.name()), Retention::default());
                    let impatient = proxy.impatient_client().await.database(db.db.name());
                    let impatient: Arc<DynInboxLifecycle<Note>> = match store.strategy() {
                        mongo_social::inbox::Strategy::FanOutOnRead => Arc::new(
                            FanOutOnRead::builder(&impatient)
                                .retry_policy(testing::impatient_retry())
                                .build()
                                .unwrap(),
                        ),
                        mongo_social::inbox::Strategy::FanOutOnWrite => Arc::new(
                            FanOutOnWrite::builder(&impatient)
                                .retry_policy(testing::impatient_retry())
                                .build()
                                .unwrap(),
                        ),
                        _ => Arc::new(
                            BucketedFanOut::builder(&impatient)
                                .retry_policy(testing::impatient_retry())
                                .build()
                                .unwrap(),
                        ),
                    };
                    store.set_up().await.expect("create indexes");
                    lifecycle_suite::survives_outage(store, impatient, &proxy).await;
                }

                #[tokio::test]
                async fn upcasts() {
                    let (_db, store) = store("upcasts").await;
                    lifecycle_suite::upcasts(store).await;
                }
            }
        };
    }

    lifecycle!(fan_out_on_read);
    lifecycle!(fan_out_on_write);
    lifecycle!(bucketed);

    /// The table of lifecycle costs in docs/INBOXES.md is the one the suite asserts.
    #[test]
    fn readme_shows_the_asserted_costs() {
        let readme = include_str!("../docs/INBOXES.md");
        let table = lifecycle_suite::cost_table();
        assert!(
            readme.contains(&table),
            "docs/INBOXES.md lacks the lifecycle cost table; put this in its place:\n{table}"
        );
    }
}

/// Concurrent sends to groups finish, and each member gets each message once. FerretDB 1.x
/// keeps a connection of its pool for every statement of an `update` command until the command
/// ends: with 50 statements per command, 4 senders each sending twice to its own 50 members
/// filled its pool and left it waiting on itself for good (see
/// `Capabilities::max_update_statements`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sends_to_groups_finish() {
    let db = testing::test_db("concurrent_group_sends").await;
    let store = BucketedFanOut::<String>::new(&db.db);
    store.set_up().await.expect("indexes");
    let group =
        |sender: usize| -> Vec<String> { (0..50).map(|i| format!("g{sender}member{i}")).collect() };
    let sends = (0..4).map(|sender| {
        let store = store.clone();
        async move {
            for round in 0..2 {
                let text = format!("from {sender}, round {round}");
                store
                    .send(NewMessage::new(
                        format!("sender{sender}"),
                        group(sender),
                        text,
                    ))
                    .await?;
            }
            Ok::<_, Error>(())
        }
    });
    // A guard against a server that stops answering, not a speed limit.
    tokio::time::timeout(
        Duration::from_secs(600),
        futures::future::try_join_all(sends),
    )
    .await
    .expect("the sends finished")
    .expect("every send succeeded");
    for sender in 0..4 {
        for member in group(sender) {
            assert_eq!(store.count(&member).await.unwrap(), 2, "{member}");
        }
    }
}

/// Payloads that look like operators or field paths stay data, in every strategy: where the
/// bucketed push is an update pipeline, its entry goes in as a `$literal`. Concurrent senders
/// into the same buckets keep each inbox in `sent` order.
#[tokio::test]
async fn payloads_that_look_like_expressions_stay_data() {
    let db = testing::test_db("payloads_stay_data").await;
    let stores: Vec<Arc<DynInboxStore<String>>> = vec![
        Arc::new(BucketedFanOut::new(&db.db)),
        Arc::new(FanOutOnWrite::new(&db.db)),
        Arc::new(FanOutOnRead::new(&db.db)),
    ];
    for store in &stores {
        store.set_up().await.expect("indexes");
        let texts = ["$5 off", "$$ROOT", "$messages", "{ $inc: 1 }"];
        let sends = texts.iter().enumerate().map(|(i, text)| {
            let store = store.clone();
            let to = vec!["bob".to_owned(), format!("other{i}")];
            async move {
                store
                    .send(NewMessage::new(format!("sender{i}"), to, text.to_string()))
                    .await
            }
        });
        futures::future::try_join_all(sends).await.expect("sends");
        let page = store
            .inbox_page("bob", PageRequest::first(10))
            .await
            .expect("page");
        let mut got: Vec<&str> = page.items.iter().map(|m| m.payload.as_str()).collect();
        got.sort_unstable();
        let mut want = texts.to_vec();
        want.sort_unstable();
        assert_eq!(got, want, "{:?}", store.strategy());
        let sent: Vec<_> = page.items.iter().map(|m| m.sent).collect();
        assert!(
            sent.windows(2).all(|w| w[0] >= w[1]),
            "newest first: {sent:?}"
        );
    }
}

/// Every inbox page, walked by its cursors, shows what a plain sort of the owner's messages
/// shows: the messages not hidden (deleted, retracted, muted, blocked) by `(sent, id)` newest
/// first, ties on `sent` broken by id, each with its read state and star; the counts agree.
/// The owner holds more than 1,000 messages (another owner's are interleaved), so the page
/// queries' shapes are checked where an engine could plan them differently.
mod plain_sort {
    use mongo_social::inbox::{DynInboxTransfer, Gone, HeldMessage};

    use super::*;

    const OWNER: &str = "bob";
    /// The owner's messages: three to a millisecond.
    const HELD: usize = 1_110;

    fn fan_out_on_read(db: &Database) -> Arc<DynInboxTransfer<Note>> {
        Arc::new(FanOutOnRead::new(db))
    }

    fn fan_out_on_write(db: &Database) -> Arc<DynInboxTransfer<Note>> {
        Arc::new(FanOutOnWrite::new(db))
    }

    fn bucketed(db: &Database) -> Arc<DynInboxTransfer<Note>> {
        Arc::new(BucketedFanOut::new(db))
    }

    /// `count` messages for `owner` from six senders, three to a millisecond from `base` on,
    /// ids within a millisecond in another order than the messages', with some read, starred,
    /// deleted, muted and blocked; oldest first, as `import` takes them.
    fn held(template: &HeldMessage, owner: &str, count: usize, base: i64) -> Vec<HeldMessage> {
        let mut messages: Vec<HeldMessage> = (0..count)
            .map(|i| {
                let mut message = template.clone();
                message.id = MessageId::new();
                message.from = format!("s{}", i % 6);
                message.to = vec![owner.to_owned()];
                message.sent = bson::DateTime::from_millis(base + (i / 3) as i64);
                message.payload = Some(
                    bson::to_bson(&Note {
                        sender: message.from.clone(),
                        seq: i as u32,
                        text: format!("{owner} {i}"),
                    })
                    .unwrap(),
                );
                message.read = i % 5 == 0;
                message.starred = i % 11 == 0;
                message.gone = (i % 13 == 0).then_some(Gone::Deleted);
                message.muted = i % 17 == 0;
                message.blocked = i % 19 == 0;
                message
            })
            .collect();
        // Ids made in order: reverse each millisecond's, so an id tie-break is visible.
        for group in messages.chunks_mut(3) {
            let mut ids: Vec<MessageId> = group.iter().map(|m| m.id).collect();
            ids.reverse();
            for (message, id) in group.iter_mut().zip(ids) {
                message.id = id;
            }
        }
        messages.sort_by_key(|m| (m.sent, m.id.0));
        messages
    }

    /// The owner's pages of `limit`, walked by their cursors: `(id, read, starred)` in order.
    async fn walk(store: &DynInboxTransfer<Note>, limit: usize) -> Vec<(MessageId, bool, bool)> {
        let mut shown = Vec::new();
        let mut page = PageRequest::first(limit);
        loop {
            let read = store.inbox_page(OWNER, page).await.unwrap();
            assert!(read.items.len() <= limit);
            shown.extend(read.items.iter().map(|m| (m.id, m.read, m.starred)));
            match read.next {
                Some(next) => page = PageRequest::after(limit, next),
                None => return shown,
            }
        }
    }

    async fn pages_match_a_plain_sort(store: Arc<DynInboxTransfer<Note>>) {
        store.set_up().await.unwrap();
        store
            .send(NewMessage::new("s0", [OWNER], Note::new("s0", 0)))
            .await
            .unwrap();
        let template: HeldMessage = store
            .export(OWNER)
            .await
            .unwrap()
            .try_next()
            .await
            .unwrap()
            .expect("the template is held");
        store.purge(OWNER).await.unwrap();
        let base = template.sent.timestamp_millis() - 10_000_000;
        let mut messages = held(&template, OWNER, HELD, base);
        for chunk in messages.chunks(250) {
            store.import(OWNER, chunk).await.unwrap();
        }
        let others = held(&template, "carol", HELD / 10, base + 1);
        store.import("carol", &others).await.unwrap();
        // Hidden and marked through the store too: a muted and a blocked sender, a deletion, a
        // retraction, a message read and one starred.
        store.mute(OWNER, "s4").await.unwrap();
        store.block(OWNER, "s5").await.unwrap();
        let visible: Vec<usize> = (0..messages.len())
            .filter(|&i| messages[i].is_shown() && !["s4", "s5"].contains(&&*messages[i].from))
            .collect();
        let (deleted, retracted, read, starred) = (
            visible[10],
            visible[20],
            visible[visible.len() - 2],
            visible[visible.len() - 3],
        );
        store.delete(OWNER, messages[deleted].id).await.unwrap();
        messages[deleted].gone = Some(Gone::Deleted);
        let sender = messages[retracted].from.clone();
        store
            .retract(&sender, messages[retracted].id)
            .await
            .unwrap();
        messages[retracted].gone = Some(Gone::Retracted);
        store.mark_read(OWNER, messages[read].id).await.unwrap();
        messages[read].read = true;
        store
            .set_starred(OWNER, messages[starred].id, true)
            .await
            .unwrap();
        messages[starred].starred = true;

        let mut expected: Vec<&HeldMessage> = messages
            .iter()
            .filter(|m| m.is_shown() && !["s4", "s5"].contains(&&*m.from))
            .collect();
        expected.sort_by_key(|m| std::cmp::Reverse((m.sent, m.id.0)));
        let expected: Vec<(MessageId, bool, bool)> =
            expected.iter().map(|m| (m.id, m.read, m.starred)).collect();
        assert!(expected.len() > 500, "{} shown", expected.len());
        for limit in [50, 97] {
            let shown = walk(&*store, limit).await;
            assert_eq!(shown.len(), expected.len(), "pages of {limit}");
            assert!(
                shown == expected,
                "pages of {limit} differ from a plain sort"
            );
        }
        assert_eq!(store.count(OWNER).await.unwrap(), expected.len() as u64);
        let unread = expected.iter().filter(|(_, read, _)| !read).count();
        assert_eq!(store.unread_count(OWNER).await.unwrap(), unread as u64);
        // A capped count is exact below its cap and the cap above it.
        let unread = unread as u64;
        for (cap, counted) in [
            (0, 0),
            (1, 1),
            (100, 100),
            (unread, unread),
            (unread + 5, unread),
        ] {
            let up_to = store.unread_count_up_to(OWNER, cap).await.unwrap();
            assert_eq!(up_to, counted, "unread up to {cap}");
        }
    }

    #[tokio::test]
    async fn fan_out_on_read_pages_match_a_plain_sort() {
        let db = testing::test_db("plain_sort_read").await;
        pages_match_a_plain_sort(fan_out_on_read(&db.db)).await;
    }

    #[tokio::test]
    async fn fan_out_on_write_pages_match_a_plain_sort() {
        let db = testing::test_db("plain_sort_write").await;
        pages_match_a_plain_sort(fan_out_on_write(&db.db)).await;
    }

    #[tokio::test]
    async fn bucketed_pages_match_a_plain_sort() {
        let db = testing::test_db("plain_sort_buckets").await;
        pages_match_a_plain_sort(bucketed(&db.db)).await;
    }
}
