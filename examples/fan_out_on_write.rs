//! Fan out on write: direct messages and small groups, where every recipient gets their own copy.
//!
//! ```text
//! cargo run --example fan_out_on_write
//! ```
//!
//! Shows that a send is one `insert` command carrying one document per recipient (the collection
//! grows by N for a message to N people), that each copy names its `recipient`, and that reading
//! an inbox is one `find` per page over that recipient's own index range, paged with the cursor.
//!
//! Choose [`FanOutOnWrite`] when inboxes are read far more often than messages are sent and
//! messages have few recipients (direct messages, small groups): every page read touches one
//! contiguous index range, and on a sharded cluster (shard key `{recipient: 1, sent: 1}`) one
//! shard. The price is paid at write time and in storage: N documents and N index entries per
//! message, so avoid it for large broadcasts; see `bucketed_fan_out` for fewer index entries.
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time).

mod common;

use bson::{doc, Document};
use futures::TryStreamExt;
use mongo_social::{DynInboxStore, FanOutOnWrite, Message, NewMessage, PageRequest};

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_example_fan_out_on_write").await?;

    let copies = FanOutOnWrite::new(&db);
    let store: &DynInboxStore<String> = &copies;
    store.create_indexes().await?;
    let raw = db.collection::<Document>("inbox_copies");

    println!("== direct messages and a weekend-plans group of three ==");
    let mut last_group_message = None;
    for (from, to, text) in [
        ("ana", vec!["bob"], "Are you around this weekend?"),
        ("bob", vec!["ana"], "Yes! Hiking?"),
        ("ana", vec!["bob", "chen"], "Adding Chen: hike Saturday?"),
        ("chen", vec!["ana", "bob"], "In. Which trail?"),
        (
            "bob",
            vec!["ana", "chen"],
            "Ridge loop, 9am at the trailhead",
        ),
        ("dee", vec!["bob"], "Can I borrow your tent?"),
        ("ana", vec!["bob", "chen"], "I'll bring snacks"),
        ("chen", vec!["ana", "bob"], "Forecast says sunny"),
        ("bob", vec!["dee"], "Sure, pick it up Friday"),
    ] {
        let before = raw.count_documents(doc! {}).await?;
        let (sent, names) = commands
            .measure(store.send(NewMessage::new(from, to.clone(), text.to_string())))
            .await;
        let sent = sent?.message;
        let added = raw.count_documents(doc! {}).await? - before;
        let plural = if added == 1 { "copy" } else { "copies" };
        println!(
            "  {from:>4} -> {:<9} {names:?} +{added} {plural:<6}  {text}",
            to.join(",")
        );
        if sent.to.len() > 1 {
            last_group_message = Some(sent);
        }
    }

    let last = last_group_message.expect("the chat has group messages");
    println!(
        "\n== the stored copies of the last group message ({}) ==",
        last.id
    );
    let copies: Vec<Document> = raw
        .find(doc! { "id": last.id.0 })
        .sort(doc! { "recipient": 1 })
        .projection(doc! { "_id": 0, "recipient": 1, "id": 1, "from": 1, "to": 1 })
        .await?
        .try_collect()
        .await?;
    for copy in copies {
        println!("  {copy}");
    }

    println!("\n== bob's inbox, 3 per page, following the cursor ==");
    // One `find` per page; the cursor continues exactly where the page ended.
    let mut request = PageRequest::first(3);
    loop {
        let (page, names) = commands.measure(store.inbox_page("bob", request)).await;
        let page = page?;
        println!("  page {names:?}");
        for message in &page.items {
            print_message(message);
        }
        match page.next {
            Some(cursor) => request = PageRequest::after(3, cursor),
            None => break,
        }
    }

    for owner in ["ana", "bob", "chen", "dee"] {
        let (count, names) = commands.measure(store.count(owner)).await;
        let count = count?;
        let plural = if count == 1 { "" } else { "s" };
        println!("{owner:>4} has {count} message{plural} {names:?}");
    }
    println!(
        "{} copies stored in `{}` for 9 messages",
        raw.count_documents(doc! {}).await?,
        raw.name()
    );
    for key in store.shard_keys() {
        println!(
            "shard `{}` on {}: {}",
            key.collection, key.key, key.rationale
        );
    }
    Ok(())
}

fn print_message(message: &Message<String>) {
    println!(
        "    {} {:>5} -> {:<9}: {}",
        message.sent.to_chrono().format("%H:%M:%S%.3f"),
        message.from,
        message.to.join(","),
        message.payload
    );
}
