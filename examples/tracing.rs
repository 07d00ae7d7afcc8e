//! The spans and events of a few operations, printed by `tracing-subscriber`'s fmt layer.
//!
//! ```text
//! cargo run --example tracing                          # RUST_LOG=mongo_social=debug
//! RUST_LOG=mongo_social=info cargo run --example tracing  # retries, fallbacks, failures only
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time). Needs the crate's `tracing` feature, which its examples have. Each span is
//! printed as it closes, with its fields (`strategy`, `recipients`, `commands`, `outcome`) and
//! how long it took; the server's missing capabilities are printed once, at detection.

use async_trait::async_trait;
use bson::doc;
use mongo_social::jobs::{Job, JobHandler, JobQueue};
use mongo_social::{FanOutOnWrite, InboxStore, NewMessage, PageRequest};
use mongo_social_lab as testing;
use mongodb::options::ClientOptions;
use mongodb::Client;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;

/// A job handler that does nothing, for the job's spans.
#[derive(Debug)]
struct Nothing;

#[async_trait]
impl JobHandler for Nothing {
    async fn handle(&self, _job: &Job) -> mongo_social::Result<()> {
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("mongo_social=debug"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .init();

    let mut options = ClientOptions::parse(testing::server_uri()).await?;
    mongo_social::observe::attach(&mut options); // each span's `commands`
    let client = Client::with_options(options)?;
    let db = client.database("mongo_social_tracing");
    db.drop().await?;

    println!("-- an inbox: indexes (and detection), a send, a page, a refused send --");
    let inbox: FanOutOnWrite<String> = FanOutOnWrite::new(&db);
    inbox.create_indexes().await?;
    inbox
        .send(NewMessage::new("joe", ["bob", "jane"], "Hi!".to_string()))
        .await?;
    inbox.inbox_page("bob", PageRequest::first(20)).await?;
    let no_one: [&str; 0] = [];
    let refused = inbox
        .send(NewMessage::new("joe", no_one, "to no one".to_string()))
        .await;
    println!("(refused: {})", refused.is_err());

    println!("-- a job: enqueued, claimed, run, finished --");
    let queue = JobQueue::new(&db);
    queue.create_indexes().await?;
    queue.enqueue("example", doc! { "n": 1 }).await?;
    queue.run_pending(&Nothing).await?;
    Ok(())
}
