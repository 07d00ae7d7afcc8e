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

use mongo_social::testing::{self, CommandCounter};
use mongo_social::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, Message, NewMessage, PageRequest,
};
use mongodb::options::ClientOptions;
use mongodb::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let commands = CommandCounter::new();
    let mut options = ClientOptions::parse(testing::server_uri()).await?;
    commands.attach(&mut options);
    let client = Client::with_options(options)?;
    let db = client.database("mongo_social_quickstart");
    db.drop().await?;
    let info = mongo_social::ServerInfo::detect(&client).await?;
    println!("server: {}\n", info.describe());

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
            commands.reset();
            store
                .send(NewMessage::new(from, to.clone(), text.to_string()))
                .await?;
            println!(
                "  send {from:>4} -> {:<16} {:?}",
                to.join(","),
                commands.names()
            );
        }

        commands.reset();
        let page = store.inbox_page("bob", PageRequest::first(4)).await?;
        print_messages("bob's inbox, newest first", &commands, &page.items)?;
        if let Some(cursor) = page.next {
            commands.reset();
            let older = store
                .inbox_page("bob", PageRequest::after(4, cursor))
                .await?;
            print_messages("older", &commands, &older.items)?;
        }
        println!("  bob has {} messages\n", store.count("bob").await?);
    }
    Ok(())
}

fn print_messages(
    title: &str,
    commands: &CommandCounter,
    messages: &[Message<String>],
) -> Result<(), Box<dyn std::error::Error>> {
    println!("  {title} ({:?}):", commands.names());
    for message in messages {
        let sent = message.sent.try_to_rfc3339_string()?;
        println!("    {sent} {:>5}: {}", message.from, message.payload);
    }
    Ok(())
}
