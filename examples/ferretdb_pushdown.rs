//! Which filter shapes a server answers without decoding the whole collection: one `find`,
//! `update` and `delete` by each shape, on a collection of N documents (default 20,000 of about
//! 300 bytes; `N` and `PAD` set them). Made for FerretDB 1.x, whose SQLite backend hands SQLite
//! only a filter that is exactly `{_id: <string or ObjectId>}` (see
//! `Capabilities::filters_beyond_id`); on MongoDB every shape below walks an index.
//!
//! ```text
//! cargo run --release --example ferretdb_pushdown            # the fixture's FerretDB
//! MONGODB_URI=mongodb://127.0.0.1:27017/ cargo run --release --example ferretdb_pushdown
//! ```

mod common;

use std::future::Future;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use common::ExampleResult;
use mongodb::IndexModel;

/// Timed repetitions of each operation; the median is printed.
const REPETITIONS: usize = 7;

#[tokio::main]
async fn main() -> ExampleResult {
    let n: usize = env_number("N", 20_000);
    let pad = "x".repeat(env_number("PAD", 200));
    let connection = common::connect("mongo_social_example_pushdown").await?;
    let db = connection.db;
    let collection = db.collection::<Document>("documents");
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let documents = chunk.iter().map(|i| {
            doc! {
                "_id": format!("u{i}/0"), "owner": format!("u{i}"), "sequence": 0_i64,
                "count": 0_i64, "pad": &pad,
            }
        });
        collection.insert_many(documents).await?;
    }
    collection
        .create_index(
            IndexModel::builder()
                .keys(doc! { "owner": 1, "sequence": 1 })
                .build(),
        )
        .await?;
    let owner = format!("u{}", n * 7 / 10);
    let id = format!("{owner}/0");
    println!(
        "{n} documents; each figure is the median of {REPETITIONS} runs (`find` is a `find_one`)\n"
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12}",
        "filter", "find", "update", "delete"
    );
    for (name, filter) in [
        ("{_id}", doc! { "_id": &id }),
        ("{_id, owner}", doc! { "_id": &id, "owner": &owner }),
        (
            "{owner, sequence}",
            doc! { "owner": &owner, "sequence": 0_i64 },
        ),
        ("{_id: {$in: [id]}}", doc! { "_id": { "$in": [&id] } }),
    ] {
        let find = median(|| async {
            collection.find_one(filter.clone()).await?;
            Ok(())
        })
        .await?;
        let update = median(|| async {
            collection
                .update_one(filter.clone(), doc! { "$inc": { "count": 1_i64 } })
                .await?;
            Ok(())
        })
        .await?;
        // Each delete is undone, untimed, by inserting the document again.
        let mut delete = Vec::with_capacity(REPETITIONS);
        for _ in 0..REPETITIONS {
            let document = collection.find_one(doc! { "_id": &id }).await?;
            let start = Instant::now();
            collection.delete_one(filter.clone()).await?;
            delete.push(start.elapsed());
            if let Some(document) = document {
                collection.insert_one(document).await?;
            }
        }
        delete.sort();
        println!(
            "{name:<28} {:>12} {:>12} {:>12}",
            millis(find),
            millis(update),
            millis(delete[REPETITIONS / 2])
        );
    }
    db.drop().await?;
    Ok(())
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// The median time of `REPETITIONS` runs of `operation`, after one untimed run.
async fn median<F, Fut>(mut operation: F) -> ExampleResult<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ExampleResult>,
{
    operation().await?;
    let mut times = Vec::with_capacity(REPETITIONS);
    for _ in 0..REPETITIONS {
        let start = Instant::now();
        operation().await?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[REPETITIONS / 2])
}
