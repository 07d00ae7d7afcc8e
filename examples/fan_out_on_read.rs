//! Fan out on read: a team chat where every message is stored once, however many people get it.
//!
//! ```text
//! cargo run --example fan_out_on_read
//! ```
//!
//! Shows that a send is one `insert` of one document whether it goes to 4 people or to 300, that
//! the collection holds one document per *message* (not per delivery), and that reading an inbox
//! is one `find` per page, paged with the cursor until it runs out.
//!
//! Choose [`FanOutOnRead`] when messages are sent far more often than inboxes are read, or go to
//! very many recipients (announcements, large groups): writes are cheapest and storage is
//! smallest. The price is paid at read time: an inbox is gathered from the `{to, sent, id}`
//! index, and on a sharded cluster (shard key `{from: 1}`) every page is scattered to all shards.
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time).

mod common;

use bson::Document;
use mongo_social::{DynInboxStore, FanOutOnRead, NewMessage, PageRequest};

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_example_fan_out_on_read").await?;

    let messages = FanOutOnRead::new(&db);
    let store: &DynInboxStore<String> = &messages;
    store.create_indexes().await?;
    let raw = db.collection::<Document>("inbox");

    println!("== team chat: every member posts to the other four ==");
    let team = ["ana", "bob", "chen", "dee", "eli"];
    for (from, text) in [
        ("ana", "Morning all, standup in 5"),
        ("chen", "Running late, start without me"),
        ("dee", "Release notes are in the doc"),
        ("bob", "I'll review the migration PR"),
        ("eli", "CI is red on main, looking"),
        ("eli", "Fixed: flaky test quarantined"),
        ("ana", "Thanks Eli!"),
        ("dee", "Retro moved to Thursday"),
    ] {
        let to: Vec<&str> = team.iter().copied().filter(|p| *p != from).collect();
        let (sent, names) = commands
            .measure(store.send(NewMessage::new(from, to, text.to_string())))
            .await;
        sent?;
        println!("  {from:>4} -> 4 members {names:?}  {text}");
    }
    println!(
        "  {} documents in `{}` for 8 messages x 4 recipients = 32 deliveries",
        raw.count_documents(bson::doc! {}).await?,
        raw.name()
    );

    println!("\n== an all-hands announcement to 300 people ==");
    let everyone: Vec<String> = team
        .iter()
        .map(|p| p.to_string())
        .chain((0..295).map(|i| format!("employee{i}")))
        .collect();
    let (sent, names) = commands
        .measure(store.send(NewMessage::new(
            "ceo",
            everyone,
            "Offsite is confirmed for May".to_string(),
        )))
        .await;
    let sent = sent?.message;
    println!(
        "  ceo -> {} recipients {names:?}; the collection now holds {} documents",
        sent.to.len(),
        raw.count_documents(bson::doc! {}).await?
    );

    println!("\n== bob's inbox, 3 per page, following the cursor ==");
    // One `find` per page; the cursor continues exactly where the page ended.
    let mut request = PageRequest::first(3);
    loop {
        let (page, names) = commands.measure(store.inbox_page("bob", request)).await;
        let page = page?;
        println!("  page {names:?}");
        for message in &page.items {
            common::print_message(message);
        }
        match page.next {
            Some(cursor) => request = PageRequest::after(3, cursor),
            None => break,
        }
    }

    let (count, names) = commands.measure(store.count("bob")).await;
    println!("\nbob has {} messages {names:?}", count?);
    let (count, names) = commands.measure(store.count("employee7")).await;
    println!("employee7 has {} message {names:?}", count?);
    for key in store.shard_keys() {
        println!(
            "shard `{}` on {}: {}",
            key.collection, key.key, key.rationale
        );
    }
    Ok(())
}
