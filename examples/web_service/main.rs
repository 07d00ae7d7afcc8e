//! A JSON web service on the crate, with axum: an inbox (send with an idempotency key, pages,
//! unread count, mark read), comments (post, reply, vote, pages sorted by "best", the ranked
//! thread) and grouped notifications, every failure mapped to an HTTP status in one function.
//! The routes are listed in `app.rs`; `tests/web_service.rs` drives them over HTTP.
//!
//! ```text
//! cargo run --example web_service                 # on 127.0.0.1:3000
//! cargo run --example web_service -- 127.0.0.1:0  # on a free port (printed)
//! curl -X POST localhost:3000/users/joe/messages -H 'content-type: application/json' \
//!      -H 'idempotency-key: 7f3a' -d '{"to": ["bob"], "text": "Hi!"}'
//! curl 'localhost:3000/users/bob/inbox?limit=20'
//! ```
//!
//! It uses `MONGODB_URI` when set, otherwise a local development server that this repository's
//! test lab starts (a temporary database that goes when the process stops); an application
//! reads `MONGODB_URI` (see "A local database for the development binary" in `docs/WEB.md`).

mod app;

use std::time::Duration;

use mongo_social::mongodb::{options::ClientOptions, Client};
use mongo_social::retry::RetryPolicy;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `MONGODB_URI` if set; otherwise a private local server, started for this process.
    let uri = mongo_social_lab::server_uri();
    // The driver's timeouts bounded by the stores' retry budget: a database that cannot be
    // reached answers 503 within it.
    let retry = RetryPolicy::default().budget(Duration::from_secs(5));
    let mut options = ClientOptions::parse(uri).await?;
    retry.apply_to(&mut options);
    let client = Client::with_options(options)?;

    let app = app::App::new(&client.database("web_service"), retry)?;
    app.create_indexes().await?;
    let _outbox = app.start_outbox_worker();

    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    println!("listening on http://{}", listener.local_addr()?);
    app::serve(listener, app).await?;
    Ok(())
}
