//! The capacity model (`docs/CAPACITY.md`): what each operation of each store costs, measured on
//! the server, and the load a stated workload puts on a sharded MongoDB cluster.
//!
//! ```text
//! MONGO_SOCIAL_SERVER=mongo-java-server cargo run --release --example capacity -- docs/CAPACITY.md
//! MONGODB_URI=mongodb://127.0.0.1:27017/ cargo run --release --example capacity -- docs/CAPACITY.md
//! ```
//!
//! Measured: commands and documents from the driver's command monitoring; index entries from
//! the writes' documents and the collections' indexes; bytes from `dbStats.dataSize` before and
//! after. Run it on a server that takes MongoDB's paths and reports `dataSize` in bytes
//! (MongoDB, or mongo-java-server); FerretDB 1.x takes locks (more commands) and reports sizes in
//! whole pages. Without a path it prints the report.

mod log;
mod measure;
mod model;
mod report;

use mongo_social::server::ServerInfo;

/// The heading of `docs/CAPACITY.md`'s section that this example does not write.
const GROWTH_SECTION: &str = "\n## How costs grow with an inbox\n";

#[tokio::main]
async fn main() -> Result<(), measure::Error> {
    let out = std::env::args().nth(1);
    let uri = mongo_social_lab::server_uri();
    let client = mongodb::Client::with_uri_str(uri).await?;
    let info = ServerInfo::detect(&client).await?;
    println!("server: {}", info.describe());
    let costs = measure::run(uri).await?;
    let loads = model::loads(&costs, &model::WORKLOAD, &model::LIMITS);
    let server = if std::env::var_os("MONGODB_URI").is_some_and(|uri| !uri.is_empty()) {
        "MONGODB_URI=... ".to_owned()
    } else {
        format!(
            "MONGO_SOCIAL_SERVER={} ",
            std::env::var("MONGO_SOCIAL_SERVER").unwrap_or_else(|_| "ferretdb".to_owned())
        )
    };
    let command = format!("{server}cargo run --release --example capacity -- docs/CAPACITY.md");
    let mut text = report::render(&command, &info, &costs, &loads);
    match out {
        Some(path) => {
            // The growth section comes from another command (`compare`'s growth part, run on
            // several servers): kept as it is.
            if let Ok(old) = std::fs::read_to_string(&path) {
                if let Some(at) = old.find(GROWTH_SECTION) {
                    text.push_str(&old[at..]);
                }
            }
            std::fs::write(&path, &text)?;
            println!("wrote {path}");
        }
        None => println!("{text}"),
    }
    Ok(())
}
