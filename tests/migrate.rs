//! Moving inboxes between strategies: every strategy's export imported into every other
//! strategy leaves each owner's inbox as it was, state and all.

use std::sync::Arc;

use futures::TryStreamExt;
use mongo_social::inbox::{DynInboxTransfer, HeldMessage, UpTo};
use mongo_social::testing;
use mongo_social::{BucketedFanOut, FanOutOnRead, FanOutOnWrite, Message, NewMessage, PageRequest};
use mongodb::Database;

type Store = Arc<DynInboxTransfer<String>>;

/// The three strategies in `db`, their collections named apart by `prefix`.
fn stores(db: &Database, prefix: &str) -> Vec<(&'static str, Store)> {
    vec![
        (
            "fan-out-on-read",
            Arc::new(
                FanOutOnRead::<String>::builder(db)
                    .collection_prefix(prefix)
                    .build()
                    .unwrap(),
            ) as Store,
        ),
        (
            "fan-out-on-write",
            Arc::new(
                FanOutOnWrite::<String>::builder(db)
                    .collection_prefix(prefix)
                    .build()
                    .unwrap(),
            ),
        ),
        (
            "bucketed-fan-out",
            Arc::new(
                BucketedFanOut::<String>::builder(db)
                    .collection_prefix(prefix)
                    .bucket_size(4)
                    .build()
                    .unwrap(),
            ),
        ),
    ]
}

const OWNERS: [&str; 4] = ["ann", "bob", "cat", "dan"];

/// A history with every kind of state: group and direct messages, a list past 16 names, reads
/// and stars, a delete, a retraction, an edit, a muted sender and a blocked one.
async fn fill(store: &Store) {
    store.create_indexes().await.unwrap();
    let send =
        |from: &str, to: Vec<String>, text: String| store.send(NewMessage::new(from, to, text));
    let mut sent: Vec<Message<String>> = Vec::new();
    for i in 0..14 {
        let to: Vec<String> = OWNERS
            .iter()
            .filter(|o| **o != OWNERS[i % 4])
            .map(|o| o.to_string())
            .collect();
        sent.push(
            send(OWNERS[i % 4], to, format!("group {i}"))
                .await
                .unwrap()
                .message,
        );
    }
    let crowd: Vec<String> = OWNERS
        .iter()
        .map(|o| o.to_string())
        .chain((0..20).map(|i| format!("fan{i:02}")))
        .collect();
    sent.push(
        send("zed", crowd, "to everyone".into())
            .await
            .unwrap()
            .message,
    );
    store.mark_read("bob", sent[0].id).await.unwrap();
    store
        .mark_read_up_to("cat", UpTo::Message(sent[5].id))
        .await
        .unwrap();
    store.set_starred("dan", sent[4].id, true).await.unwrap();
    store.delete("bob", sent[4].id).await.unwrap();
    store.retract("ann", sent[8].id).await.unwrap();
    store
        .edit("bob", sent[9].id, "group 9, edited".into())
        .await
        .unwrap();
    store.mute("ann", "cat").await.unwrap();
    store.block("dan", "zed").await.unwrap();
    // After the block: not delivered to dan.
    send(
        "zed",
        vec!["dan".into(), "ann".into()],
        "blocked for dan".into(),
    )
    .await
    .unwrap();
}

/// Copies every owner of `from` into `to`, with their mute and block lists.
async fn copy(from: &Store, to: &Store) {
    let owners: Vec<String> = from
        .owners(None)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    for owner in &owners {
        let held: Vec<HeldMessage> = from
            .export(owner)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        for chunk in held.chunks(5) {
            to.import(owner, chunk).await.unwrap();
        }
        let filters = from.filters(owner).await.unwrap();
        for sender in &filters.muted {
            to.mute(owner, sender).await.unwrap();
        }
        for sender in &filters.blocked {
            to.block(owner, sender).await.unwrap();
        }
    }
}

/// What an owner sees: every page's messages (id, sender, recipients, payload, edited, read,
/// starred), the count and the unread count, and the mute and block lists.
async fn seen(store: &Store, owner: &str) -> (Vec<String>, u64, u64, Vec<String>) {
    let mut shown = Vec::new();
    let mut page = store
        .inbox_page(owner, PageRequest::first(3))
        .await
        .unwrap();
    loop {
        for m in &page.items {
            let mut to = m.to.clone();
            to.sort();
            shown.push(format!(
                "{} {} {:?} {} {:?} {} {}",
                m.id, m.from, to, m.payload, m.edited, m.read, m.starred
            ));
        }
        let Some(next) = page.next else { break };
        page = store
            .inbox_page(owner, PageRequest::after(3, next))
            .await
            .unwrap();
    }
    let filters = store.filters(owner).await.unwrap();
    let lists = vec![
        format!("{:?}", filters.muted),
        format!("{:?}", filters.blocked),
    ];
    (
        shown,
        store.count(owner).await.unwrap(),
        store.unread_count(owner).await.unwrap(),
        lists,
    )
}

#[tokio::test]
async fn every_strategy_imports_every_other_ones_export() {
    let t = testing::test_db("transfer_between_strategies").await;
    let sources = stores(&t.db, "src_");
    let targets = stores(&t.db, "dst_");
    for (source_name, source) in &sources {
        fill(source).await;
        let owners: Vec<String> = source
            .owners(None)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut expected: Vec<String> = OWNERS
            .iter()
            .map(|o| o.to_string())
            .chain((0..20).map(|i| format!("fan{i:02}")))
            .collect();
        expected.sort();
        assert_eq!(owners, expected, "{source_name}: owners in order");
        for (target_name, target) in &targets {
            target.create_indexes().await.unwrap();
            target.purge_all().await.unwrap();
            assert!(target.is_empty().await.unwrap());
            copy(source, target).await;
            // Repeating the last import (a lost reply) changes nothing.
            let held: Vec<HeldMessage> = source
                .export("bob")
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let last = &held[held.len() - held.len() % 5..];
            let last = if last.is_empty() {
                &held[held.len() - 5..]
            } else {
                last
            };
            target.import("bob", last).await.unwrap();
            for owner in OWNERS.iter().copied().chain(["fan07"]) {
                assert_eq!(
                    seen(target, owner).await,
                    seen(source, owner).await,
                    "{source_name} -> {target_name}, {owner}"
                );
            }
            // Unmuting in the target shows what the mute hid, as in the source.
            target.unmute("ann", "cat").await.unwrap();
            source.unmute("ann", "cat").await.unwrap();
            assert_eq!(seen(target, "ann").await, seen(source, "ann").await);
            source.mute("ann", "cat").await.unwrap();
            // Purging one owner leaves the others.
            target.purge("cat").await.unwrap();
            assert_eq!(target.count("cat").await.unwrap(), 0);
            assert_eq!(seen(target, "bob").await, seen(source, "bob").await);
        }
        source.purge_all().await.unwrap();
        assert!(source.is_empty().await.unwrap());
    }
}
