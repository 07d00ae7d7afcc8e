//! Bucketed fan out: each recipient's inbox stored as a run of small documents ("buckets").
//!
//! ```text
//! cargo run --example bucketed_fan_out
//! ```
//!
//! A group chat of three plus some direct messages, with a bucket size of 5 so buckets fill and
//! roll over quickly. Shows the commands each send costs (a steady send and a send that opens new
//! buckets), the bucket documents `{owner, sequence, count}` as they sit in the raw
//! `inbox_buckets` collection (every bucket but an owner's newest is full), and an inbox read a
//! page at a time with the cursor, each page one `find` of at most a few buckets.
//!
//! Choose [`BucketedFanOut`] when inboxes are read far more often than messages are sent and
//! inboxes are long: a page of 50 is one `find` of at most 2 documents, with one index entry per
//! bucket instead of one per message, and a send costs the same few commands whatever the number
//! of recipients. The price: a more complex write path (heads, rollover; on servers without atomic
//! updates such as FerretDB 1.x, a lock per recipient), and a bucket size fixed per collection.
//! Production would use the default of 50 messages per bucket.
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time).

mod common;

use bson::{doc, Document};
use futures::TryStreamExt;
use mongo_social::{BucketedFanOut, DynInboxStore, NewMessage, PageRequest};
use mongodb::Collection;

const BUCKET_SIZE: u32 = 5;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection {
        db, commands, info, ..
    } = common::connect("mongo_social_example_bucketed_fan_out").await?;
    if !info.capabilities().atomic_updates {
        println!(
            "(this server's updates are not atomic, so each send also takes and releases a lock \
             per recipient: the `insert` and `delete` around the delivery; holding it, the send \
             reads the target buckets and pushes into each by `_id`)"
        );
    }
    println!();

    let buckets = BucketedFanOut::builder(&db)
        .bucket_size(BUCKET_SIZE)
        .build()?;
    let store: &DynInboxStore<String> = &buckets;
    store.create_indexes().await?;
    let raw = db.collection::<Document>("inbox_buckets");

    println!(
        "== a group chat (ana, bob, chen) and direct messages to bob, bucket size {BUCKET_SIZE} =="
    );
    let group = ["ana", "bob", "chen"];
    let mut total = 0;
    for round in 0..6 {
        for (from, text) in [
            ("ana", "who's up for lunch"),
            ("chen", "me, 12:30?"),
            ("dee", "(DM to bob) got a minute?"),
        ] {
            let to: Vec<&str> = if from == "dee" {
                vec!["bob"]
            } else {
                group.iter().copied().filter(|p| *p != from).collect()
            };
            let text = format!("{text} #{round}");
            let (sent, names) = commands
                .measure(store.send(NewMessage::new(from, to.clone(), text.clone())))
                .await;
            sent?;
            total += 1;
            println!(
                "  {total:>2}. {from:>4} -> {:<9} {} commands {names:?}",
                to.join(","),
                names.len()
            );
        }
    }

    println!(
        "  (a steady send reads the recipients' heads in one `find` and pushes to all of them in \
         one `update`; when a bucket is full, one `find` checks it, one `update` moves the \
         head and one more `update` delivers into the next bucket)"
    );

    println!("\n== the raw `{}` collection ==", raw.name());
    print_buckets(&raw).await?;

    println!("\n== bob's inbox, 6 per page, following the cursor ==");
    // One `find` per page; the cursor continues exactly where the page ended.
    let mut request = PageRequest::first(6);
    loop {
        let (page, names) = commands.measure(store.inbox_page("bob", request)).await;
        let page = page?;
        println!("  page {names:?}");
        for message in &page.items {
            common::print_message(message);
        }
        match page.next {
            Some(cursor) => request = PageRequest::after(6, cursor),
            None => break,
        }
    }

    for owner in ["ana", "bob", "chen"] {
        let (count, names) = commands.measure(store.count(owner)).await;
        println!(
            "{owner:>4} has {} messages {names:?} (newest bucket's sequence x {BUCKET_SIZE} + its count)",
            count?
        );
    }
    for key in store.shard_keys() {
        println!(
            "shard `{}` on {}: {}",
            key.collection, key.key, key.rationale
        );
    }
    Ok(())
}

/// Each bucket's owner, sequence and count, and the senders of the messages it holds.
async fn print_buckets(raw: &Collection<Document>) -> Result<(), Box<dyn std::error::Error>> {
    let all: Vec<Document> = raw
        .find(doc! {})
        .sort(doc! { "owner": 1, "sequence": 1 })
        .projection(doc! { "_id": 0, "owner": 1, "sequence": 1, "count": 1, "messages.from": 1 })
        .await?
        .try_collect()
        .await?;
    println!("  owner  sequence  count  messages (senders, oldest first)");
    for bucket in &all {
        let senders: Vec<&str> = bucket
            .get_array("messages")
            .map(|messages| {
                messages
                    .iter()
                    .filter_map(|m| m.as_document()?.get_str("from").ok())
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {:<5}  {:>8}  {:>5}  {}",
            bucket.get_str("owner").unwrap_or("?"),
            bucket
                .get("sequence")
                .map_or("?".to_owned(), |s| s.to_string()),
            bucket
                .get("count")
                .map_or("?".to_owned(), |c| c.to_string()),
            senders.join(" ")
        );
    }
    println!("  {} bucket documents", all.len());
    Ok(())
}
