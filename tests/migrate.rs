//! Moving inboxes between strategies: every strategy's export imported into every other
//! strategy leaves each owner's inbox as it was, state and all.

use mongo_social_lab::SetUp;
use std::sync::Arc;

use futures::TryStreamExt;
use mongo_social::inbox::{DynInboxTransfer, HeldMessage, UpTo};
use mongo_social::{BucketedFanOut, FanOutOnRead, FanOutOnWrite, Message, NewMessage, PageRequest};
use mongo_social_lab as testing;
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
    store.set_up().await.unwrap();
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
            target.set_up().await.unwrap();
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

mod online {
    use super::*;
    use mongo_social::migrate::{InboxMigration, Reads};
    use mongo_social::prelude::*;
    use mongo_social::{DynInboxStore, Error};
    use std::time::Duration;

    /// Every ordered pair of different strategies.
    fn pairs(db: &Database) -> Vec<(String, Store, Store)> {
        let mut pairs = Vec::new();
        for (i, (from, _)) in stores(db, "x").into_iter().enumerate() {
            for (j, (to, _)) in stores(db, "x").into_iter().enumerate() {
                if i != j {
                    let source = stores(db, &format!("s{i}{j}_")).remove(i).1;
                    let target = stores(db, &format!("t{i}{j}_")).remove(j).1;
                    pairs.push((format!("{from} -> {to}"), source, target));
                }
            }
        }
        pairs
    }

    /// A few hundred messages among 12 owners, with reads and deletes.
    async fn history(store: &Store) -> Vec<String> {
        store.set_up().await.unwrap();
        let owners: Vec<String> = (0..12).map(|i| format!("u{i:02}")).collect();
        for i in 0..120 {
            let from = &owners[i % 12];
            let to: Vec<String> = (1..=(1 + i % 3))
                .map(|k| owners[(i + k * 5) % 12].clone())
                .filter(|o| o != from)
                .collect();
            let sent = store
                .send(NewMessage::new(from.as_str(), to.clone(), format!("m{i}")))
                .await
                .unwrap()
                .message;
            if i % 4 == 0 {
                store.mark_read(&to[0], sent.id).await.unwrap();
            }
            if i % 11 == 0 {
                store.delete(&to[0], sent.id).await.unwrap();
            }
        }
        owners
    }

    /// Writers through the migrating store while `until` has not fired: sends, marks, deletes.
    fn writers(
        inbox: Arc<DynInboxStore<String>>,
        lifecycle: Arc<mongo_social::migrate::MigratingInbox<String>>,
        owners: Vec<String>,
        writes: usize,
    ) -> tokio::task::JoinHandle<usize> {
        use mongo_social::inbox::InboxLifecycle;
        tokio::spawn(async move {
            let mut done = 0;
            for i in 0..writes {
                let from = owners[(i * 7) % owners.len()].clone();
                // Now and then a user new since the migration started.
                let to = if i % 10 == 9 {
                    format!("zz{}", i % 3)
                } else {
                    owners[(i * 7 + 3) % owners.len()].clone()
                };
                let sent = inbox
                    .send(NewMessage::new(from, vec![to.clone()], format!("live {i}")))
                    .await
                    .unwrap()
                    .message;
                if i % 3 == 0 {
                    lifecycle.mark_read(&to, sent.id).await.unwrap();
                }
                if i % 5 == 0 {
                    lifecycle.delete(&to, sent.id).await.unwrap();
                }
                done += 1;
                tokio::task::yield_now().await;
            }
            done
        })
    }

    /// What a migration that did not finish left: its jobs and its units not ready.
    async fn stuck_copy(db: &Database, name: &str) -> String {
        let jobs: Vec<bson::Document> = db
            .collection(&format!("{name}_jobs"))
            .find(bson::doc! {})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let units: Vec<bson::Document> = db
            .collection(&format!("{name}_migration"))
            .find(bson::doc! { "state": { "$ne": "ready" } })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        format!("jobs {jobs:?}; units not ready {units:?}")
    }

    /// Every owner's inbox in the target is the source's, page by page, state and all.
    async fn same_everywhere(source: &Store, target: &Store, owners: &[String], what: &str) {
        for owner in owners {
            assert_eq!(
                seen(target, owner).await,
                seen(source, owner).await,
                "{what}: {owner}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn inboxes_move_between_every_pair_while_writers_write() {
        let t = testing::test_db("migrate_every_pair").await;
        for (pair, (name, source, target)) in pairs(&t.db).into_iter().enumerate() {
            let owners = history(&source).await;
            let migration =
                InboxMigration::builder(&t.db, format!("m{pair}"), source.clone(), target.clone())
                    .build()
                    .unwrap();
            // Writes only a migration that started sees: start first, then write.
            migration.start().await.unwrap();
            let store = migration.store();
            let writing = writers(store.clone(), store.clone(), owners.clone(), 60);
            // Once the writers are done (they always finish), nothing marks a unit dirty: the
            // copy must finish within a bounded number of rounds that run jobs, however slow
            // the writes were. A copy job that lost to the writers waits out the queue's
            // backoff (1 s doubling, at most 300 s); rounds with nothing due do not count, and
            // only a wait past the longest backoff with nothing run is a hang.
            let mut rounds = 0;
            let mut idle_since = std::time::Instant::now();
            while !writing.is_finished() || !migration.is_copied().await.unwrap() {
                let ran = migration.run_pending().await.unwrap();
                if ran > 0 {
                    idle_since = std::time::Instant::now();
                    if writing.is_finished() {
                        rounds += 1;
                    }
                }
                if rounds >= 200 || idle_since.elapsed() > Duration::from_secs(310) {
                    let stuck = stuck_copy(&t.db, &format!("m{pair}")).await;
                    panic!("{name}: the copy never finished after {rounds} rounds: {stuck}");
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(writing.await.unwrap(), 60);
            let progress = migration.progress().await.unwrap();
            assert_eq!(progress.owners_done, 15, "{name}: {progress:?}");
            assert!(progress.messages_copied >= 200, "{name}: {progress:?}");
            let mut everyone = owners.clone();
            everyone.extend((0..3).map(|i| format!("zz{i}")));
            same_everywhere(&source, &target, &everyone, &name).await;
            // Reads moved per owner: the migrating store reads the target now, the same.
            for owner in &owners {
                assert_eq!(
                    store.count(owner).await.unwrap(),
                    target.count(owner).await.unwrap()
                );
            }
            migration.finish().await.unwrap();
            // After the finish, writes reach the target alone.
            let before = source.count("u01").await.unwrap();
            store
                .send(NewMessage::new(
                    "u00",
                    vec!["u01".to_owned()],
                    "after".into(),
                ))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(1100)).await;
            store
                .send(NewMessage::new(
                    "u00",
                    vec!["u01".to_owned()],
                    "after".into(),
                ))
                .await
                .unwrap();
            assert!(target.count("u01").await.unwrap() > before, "{name}");
            assert!(source.count("u01").await.unwrap() <= before + 1, "{name}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_copy_resumes_and_an_abort_leaves_the_source_whole() {
        let t = testing::test_db("migrate_resume_abort").await;
        let source = stores(&t.db, "ra_").remove(0).1;
        let target = stores(&t.db, "rb_").remove(2).1;
        let owners = history(&source).await;
        let migration = InboxMigration::builder(&t.db, "resume", source.clone(), target.clone())
            .job_lease(Duration::from_secs(2))
            .build()
            .unwrap();
        migration.start().await.unwrap();
        // A worker killed part way: its claimed job is taken over after its lease.
        let worker = migration.start_worker();
        let mut waited = 0;
        while migration.progress().await.unwrap().owners_done < 3 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            waited += 1;
            assert!(waited < 1000, "the worker copied nothing");
        }
        worker.abort();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        while !migration.is_copied().await.unwrap() {
            migration.run_pending().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        same_everywhere(&source, &target, &owners, "resumed").await;

        // An abort: the target emptied, the source as it was, writes on the source alone.
        let before: Vec<_> =
            futures::future::join_all(owners.iter().map(|o| seen(&source, o))).await;
        migration.abort().await.unwrap();
        assert!(target.is_empty().await.unwrap());
        let after: Vec<_> =
            futures::future::join_all(owners.iter().map(|o| seen(&source, o))).await;
        assert_eq!(after, before);
        let store = migration.store();
        store
            .send(NewMessage::new(
                "u00",
                vec!["u01".to_owned()],
                "after abort".into(),
            ))
            .await
            .unwrap();
        assert!(target.is_empty().await.unwrap());
        assert!(matches!(
            migration.finish().await,
            Err(Error::Precondition { .. })
        ));
    }

    #[tokio::test]
    async fn a_cursor_made_before_the_move_is_honoured() {
        let t = testing::test_db("migrate_cursor").await;
        let source = stores(&t.db, "ca_").remove(1).1;
        let target = stores(&t.db, "cb_").remove(2).1;
        let owners = history(&source).await;
        let migration = InboxMigration::builder(&t.db, "cursor", source.clone(), target.clone())
            .reads(Reads::PerOwner)
            .build()
            .unwrap();
        migration.start().await.unwrap();
        let store = migration.store();
        let owner = &owners[3];
        let first = store
            .inbox_page(owner, PageRequest::first(5))
            .await
            .unwrap();
        let cursor = first.next.clone().expect("more than one page");
        // Not moved yet: the source's pages.
        assert!(matches!(
            migration.cut_over().await,
            Err(Error::Precondition { .. })
        ));
        while !migration.is_copied().await.unwrap() {
            migration.run_pending().await.unwrap();
        }
        let after = store
            .inbox_page(owner, PageRequest::after(5, cursor.clone()))
            .await
            .unwrap();
        let expected = source
            .inbox_page(owner, PageRequest::after(5, cursor.clone()))
            .await
            .unwrap();
        let ids = |page: &mongo_social::Page<Message<String>>| {
            page.items.iter().map(|m| m.id).collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&after),
            ids(&expected),
            "the old cursor reads on from the source"
        );
        // After the finish, the source's cursor is refused by the target.
        migration.finish().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(matches!(
            store.inbox_page(owner, PageRequest::after(5, cursor)).await,
            Err(Error::InvalidInput {
                reason: mongo_social::error::Invalid::Cursor { .. },
                ..
            })
        ));
    }
}
