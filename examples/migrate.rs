//! Moving a running application's inboxes from fan out on read to buckets.
//!
//! ```text
//! cargo run --example migrate
//! MONGO_SOCIAL_SERVER=documentdb cargo run --release --example migrate
//! ```
//!
//! Fills a fan-out-on-read store with a history, starts an [`InboxMigration`] to a bucketed
//! store, and copies owner by owner with a background worker while a task keeps sending (and
//! marking read) through the migrating store; prints the copy's progress as it goes, then
//! finishes the migration and shows every owner's counts equal in both stores.

mod common;

use std::sync::Arc;
use std::time::Duration;

use mongo_social::migrate::InboxMigration;
use mongo_social::prelude::*;
use mongo_social::{BucketedFanOut, FanOutOnRead, NewMessage};

const OWNERS: usize = 40;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let connection = common::connect("mongo_social_migrate").await?;
    let db = connection.db;
    let source = Arc::new(
        FanOutOnRead::<String>::builder(&db)
            .collection_prefix("v1_")
            .build()?,
    );
    let target = Arc::new(
        BucketedFanOut::<String>::builder(&db)
            .collection_prefix("v2_")
            .build()?,
    );
    source.create_indexes().await?;
    let owners: Vec<String> = (0..OWNERS).map(|i| format!("user{i:02}")).collect();
    for i in 0..400 {
        // One or two recipients, never the sender.
        let to: std::collections::BTreeSet<String> = [(i * 7 + 1) % OWNERS, (i * 3 + 2) % OWNERS]
            .into_iter()
            .filter(|&r| r != i % OWNERS)
            .map(|r| owners[r].clone())
            .collect();
        if to.is_empty() {
            continue;
        }
        source
            .send(NewMessage::new(
                owners[i % OWNERS].as_str(),
                to,
                format!("hello {i}"),
            ))
            .await?;
    }
    println!(
        "source (fan out on read): {} messages for user01",
        source.count("user01").await?
    );

    let migration =
        InboxMigration::builder(&db, "inbox_v2", source.clone(), target.clone()).build()?;
    let inbox = migration.store();
    migration.start().await?;
    let worker = migration.start_worker();

    // The application goes on meanwhile, through the migrating store.
    let sending = {
        let inbox = inbox.clone();
        let owners = owners.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                let to = owners[(i * 11 + 5) % OWNERS].clone();
                let sent = inbox
                    .send(NewMessage::new(
                        owners[i % OWNERS].as_str(),
                        [to.as_str()],
                        format!("live {i}"),
                    ))
                    .await?;
                if i % 4 == 0 {
                    inbox.mark_read(&to, sent.message.id).await?;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<(), mongo_social::Error>(())
        })
    };
    loop {
        let progress = migration.progress().await?;
        println!(
            "  owners {}/{}{}, {} messages copied, {:.0} messages/s, {}",
            progress.owners_done,
            progress.owners_total,
            if progress.listed { "" } else { " (listing)" },
            progress.messages_copied,
            progress.rate,
            progress
                .time_left
                .map_or("time left unknown".to_owned(), |left| format!(
                    "{:.1} s left",
                    left.as_secs_f64()
                )),
        );
        if sending.is_finished() && migration.is_copied().await? {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    sending.await??;
    worker.stop().await;
    migration.finish().await?;

    let mut equal = 0;
    for owner in &owners {
        let (from, to) = (source.count(owner).await?, target.count(owner).await?);
        let (unread_from, unread_to) = (
            source.unread_count(owner).await?,
            target.unread_count(owner).await?,
        );
        if from == to && unread_from == unread_to {
            equal += 1;
        } else {
            println!(
                "  {owner}: source {from} ({unread_from} unread), target {to} ({unread_to} unread)"
            );
        }
    }
    println!(
        "finished: {equal} of {OWNERS} owners hold the same messages and unread counts in both stores; \
         user01 has {} messages in the bucketed store",
        target.count("user01").await?
    );
    if equal != OWNERS {
        return Err("some owners differ".into());
    }
    Ok(())
}
