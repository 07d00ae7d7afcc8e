//! The three inbox strategies side by side, on the local default server.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time). Prints each strategy's view of Bob's inbox, a second page through the cursor, and
//! the commands each operation sent.

use std::sync::Arc;

use mongo_social::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, NewMessage, PageRequest,
};

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_quickstart").await?;

    let stores: Vec<Arc<DynInboxStore<String>>> = vec![
        Arc::new(FanOutOnRead::new(&db)),
        Arc::new(FanOutOnWrite::new(&db)),
        Arc::new(BucketedFanOut::builder(&db).bucket_size(4).build()?),
    ];
    for store in stores {
        store.create_indexes().await?;
        println!("== {} ==", store.strategy());

        let team = ["bob", "jane", "li", "omar"];
        for (from, text) in [
            ("joe", "Hi Bob!"),
            ("jane", "Lunch at noon?"),
            ("joe", "Deploy is green"),
            ("li", "Who has the keys?"),
            ("omar", "Standup moved to 10:15"),
            ("jane", "Slides are up"),
        ] {
            let to: Vec<&str> = team.iter().copied().filter(|p| *p != from).collect();
            let (sent, names) = commands
                .measure(store.send(NewMessage::new(from, to.clone(), text.to_string())))
                .await;
            sent?;
            println!("  send {from:>4} -> {:<16} {names:?}", to.join(","));
        }

        println!("  bob's inbox, newest first, 4 per page:");
        // One `find` per page; the cursor continues exactly where the page ended.
        let mut request = PageRequest::first(4);
        loop {
            let (page, names) = commands.measure(store.inbox_page("bob", request)).await;
            let page = page?;
            println!("  page {names:?}");
            for message in &page.items {
                common::print_message(message);
            }
            match page.next {
                Some(cursor) => request = PageRequest::after(4, cursor),
                None => break,
            }
        }
        println!("  bob has {} messages\n", store.count("bob").await?);
    }
    Ok(())
}
