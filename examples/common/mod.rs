//! Shared by the examples: connecting to the local default server, and printing a message.
//! Each example uses part of it, so unused items are expected per example.
#![allow(dead_code)]

use mongo_social::{server::ServerInfo, Message};
use mongo_social_lab::{self as testing, CommandCounter};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};

/// What the examples' `main` returns.
pub type ExampleResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// A connection to `MONGODB_URI` (or the fixture's private FerretDB) with a [`CommandCounter`]
/// attached, and a freshly dropped database for the example.
pub struct Connection {
    pub db: Database,
    pub commands: CommandCounter,
    pub info: ServerInfo,
}

/// Connects, prints which server answered, and drops `database` so each run starts clean.
pub async fn connect(database: &str) -> ExampleResult<Connection> {
    let commands = CommandCounter::new();
    let mut options = ClientOptions::parse(testing::server_uri()).await?;
    commands.attach(&mut options);
    let client = Client::with_options(options)?;
    let db = client.database(database);
    db.drop().await?;
    let info = ServerInfo::detect(&client).await?;
    println!("server: {}\n", info.describe());
    Ok(Connection { db, commands, info })
}

/// `HH:MM:SS.mmm  sender: payload`.
pub fn print_message(message: &Message<String>) {
    println!(
        "    {} {:>5}: {}",
        message.sent.to_chrono().format("%H:%M:%S%.3f"),
        message.from,
        message.payload
    );
}
