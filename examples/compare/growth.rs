//! `COMPARE_PARTS=growth`: how each inbox strategy's costs grow with one owner's inbox, from
//! 1,000 to 1,000,000 messages (`COMPARE_GROWTH_SIZES`): the newest page of 50, the next page
//! of 50 (by the newest page's cursor), the unread count as a badge shows it (up to 100, all
//! the messages unread), the exact unread count, and a send to 1 and to 100 recipients (the
//! owner among them), at each size.
//!
//! Filling an inbox of a million through `send` takes hours, so each store's inbox is loaded
//! in bulk in the store's own layout: the store writes one message, and its documents are
//! copied with new ids and times (one millisecond apart, before the template's), in unordered
//! `insert`s of 10,000; buckets through `bucket_load.rs`, as the rest of `compare` loads them,
//! afresh at each size.
//! With `COMPARE_SHARD=1` the store's collections are sharded on their shard keys first (a
//! sharded deployment, such as `MONGO_SOCIAL_SERVER=documentdb-sharded`).
//! Every measured call then goes through the store. Loaded messages have no sender's record
//! (a bucketed retract or edit would not find them), which no measured call needs.

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongo_social::inbox::DEFAULT_BUCKET_SIZE;
use mongo_social::{
    inbox::DynInboxLifecycle, inbox::MessageId, BucketedFanOut, FanOutOnRead, FanOutOnWrite,
    NewMessage, PageRequest,
};
use mongodb::Database;

use crate::{Bench, BoxResult};

/// The owner whose inbox grows.
const OWNER: &str = "bob";
/// Documents per bulk `insert`.
const LOAD_BATCH: usize = 10_000;
/// The payload of every message, as in the rest of `compare`.
const PAYLOAD: &str =
    "Hi! Are we still on for the design review at 3? I moved the slides to the shared drive. -j";

/// What is measured at each size, in the order of the tables.
const OPERATIONS: [&str; 6] = [
    "newest 50",
    "next 50",
    "unread count",
    "exact unread",
    "send to 1",
    "send to 100",
];

/// The strategies, by name.
const STRATEGIES: [&str; 3] = ["fan-out-on-read", "fan-out-on-write", "bucketed-fan-out"];

/// One measured figure.
struct Figure {
    strategy: &'static str,
    operation: &'static str,
    inbox: usize,
    millis: f64,
    commands: usize,
}

/// Grows each selected strategy's inbox through `sizes` and measures at each size; prints a
/// Markdown table per operation (strategies as rows, sizes as columns).
pub async fn run(bench: &Bench, sizes: &[usize], only: &str) -> BoxResult<()> {
    let mut figures = Vec::new();
    for strategy in STRATEGIES {
        if !crate::selected(strategy, only) {
            continue;
        }
        let db = bench.fresh_db(&format!("growth_{strategy}")).await?;
        let store: std::sync::Arc<DynInboxLifecycle<String>> = match strategy {
            "fan-out-on-read" => std::sync::Arc::new(FanOutOnRead::new(&db)),
            "fan-out-on-write" => std::sync::Arc::new(FanOutOnWrite::new(&db)),
            _ => std::sync::Arc::new(BucketedFanOut::new(&db)),
        };
        prepare(&*store).await?;
        let mut held = 0;
        for &size in sizes {
            let started = std::time::Instant::now();
            if strategy == "bucketed-fan-out" {
                // Buckets are loaded whole, from an empty inbox, at each size.
                db.drop().await?;
                prepare(&*store).await?;
                held = 0;
            }
            load(&db, strategy, &*store, held, size).await?;
            eprintln!(
                "  {strategy:<18} inbox of {size} loaded in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            for (operation, millis, commands) in measure(bench, &*store).await? {
                eprintln!("  {strategy:<18} {operation:<14} M={size:<8} {millis:>9.2} ms {commands} commands");
                figures.push(Figure {
                    strategy,
                    operation,
                    inbox: size,
                    millis,
                    commands,
                });
            }
            // The sends added messages: the next size loads from here.
            held = store.count(OWNER).await? as usize;
        }
        db.drop().await?;
    }
    print(&figures, sizes);
    Ok(())
}

/// Creates the store's indexes and, with `COMPARE_SHARD=1` (on a sharded deployment), shards its
/// collections on their shard keys, so each page is routed as an application's would be.
async fn prepare(store: &DynInboxLifecycle<String>) -> BoxResult<()> {
    store.create_indexes().await?;
    if std::env::var("COMPARE_SHARD").is_ok_and(|shard| shard == "1") {
        store.shard_collections().await?;
    }
    Ok(())
}

/// Medians of `bench.reps` calls after a warm-up, of each measured operation on the owner's
/// inbox as it is: `(operation, ms, commands)`.
async fn measure(
    bench: &Bench,
    store: &DynInboxLifecycle<String>,
) -> BoxResult<Vec<(&'static str, f64, usize)>> {
    let hundred: Vec<String> = std::iter::once(OWNER.to_owned())
        .chain((1..100).map(|i| format!("member{i:03}")))
        .collect();
    let mut out = Vec::new();
    let newest = store.inbox_page(OWNER, PageRequest::first(50)).await?;
    let second = newest.next.ok_or("no page after the newest")?;
    for operation in OPERATIONS {
        let call = || async {
            match operation {
                "newest 50" | "next 50" => {
                    let page = if operation == "newest 50" {
                        PageRequest::first(50)
                    } else {
                        PageRequest::after(50, second.clone())
                    };
                    let page = store.inbox_page(OWNER, page).await?;
                    if page.items.len() != 50 {
                        return Err(format!("read {} of {operation}", page.items.len()).into());
                    }
                }
                "unread count" => {
                    let unread = store.unread_count_up_to(OWNER, 100).await?;
                    if unread != 100 {
                        return Err(format!("{unread} unread, up to 100").into());
                    }
                }
                "exact unread" => {
                    store.unread_count(OWNER).await?;
                }
                "send to 1" => {
                    store
                        .send(NewMessage::new("joe", [OWNER], PAYLOAD.to_owned()))
                        .await?;
                }
                _ => {
                    store
                        .send(NewMessage::new("joe", hundred.clone(), PAYLOAD.to_owned()))
                        .await?;
                }
            }
            BoxResult::Ok(())
        };
        call().await?;
        let mut runs = Vec::with_capacity(bench.reps);
        for _ in 0..bench.reps {
            runs.push(bench.time(call()).await?);
        }
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (millis, commands) = runs[runs.len() / 2];
        out.push((operation, millis, commands));
    }
    Ok(out)
}

/// Loads messages into `OWNER`'s inbox until it holds `size` (it holds `held`).
async fn load(
    db: &Database,
    strategy: &str,
    store: &DynInboxLifecycle<String>,
    held: usize,
    size: usize,
) -> BoxResult<()> {
    let missing = size.saturating_sub(held);
    if missing == 0 {
        return Ok(());
    }
    if strategy == "bucketed-fan-out" {
        let messages: Vec<(String, String)> = (0..missing)
            .map(|i| (format!("sender{}", i % 4), PAYLOAD.to_owned()))
            .collect();
        crate::bucket_load::load_buckets(
            db,
            "inbox_buckets",
            "inbox_heads",
            DEFAULT_BUCKET_SIZE,
            OWNER,
            &messages,
        )
        .await?;
        return Ok(());
    }
    // The template: one message as the store writes it, and its documents.
    let sent = store
        .send(NewMessage::new("joe", [OWNER], PAYLOAD.to_owned()))
        .await?
        .message;
    let collection = db.collection::<Document>(if strategy == "fan-out-on-read" {
        "inbox"
    } else {
        "inbox_copies"
    });
    let template = collection
        .find(doc! { "id": sent.id.0 })
        .await?
        .try_next()
        .await?
        .ok_or("the template message was not stored")?;
    let first = sent.sent.timestamp_millis() - (held + missing) as i64;
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    for i in 1..missing {
        let id = MessageId::new();
        let mut copy = template.clone();
        let _id = if strategy == "fan-out-on-read" {
            Bson::ObjectId(id.0)
        } else {
            Bson::String(format!("{}.{OWNER}", id.0.to_hex()))
        };
        copy.insert("_id", _id);
        copy.insert("id", id.0);
        copy.insert("sent", bson::DateTime::from_millis(first + i as i64));
        batch.push(copy);
        if batch.len() == LOAD_BATCH {
            collection
                .insert_many(std::mem::take(&mut batch))
                .ordered(false)
                .await?;
        }
    }
    if !batch.is_empty() {
        collection.insert_many(batch).ordered(false).await?;
    }
    Ok(())
}

/// One Markdown table per operation: a row per strategy, a column per inbox size, each cell
/// the median in ms (and the commands when they are not 1).
fn print(figures: &[Figure], sizes: &[usize]) {
    for operation in OPERATIONS {
        let title = match operation {
            "unread count" => "unread count (up to 100)",
            "exact unread" => "unread count (exact)",
            _ => operation,
        };
        println!("\n{title}, by messages in the owner's inbox:\n");
        let header: Vec<String> = sizes.iter().map(|s| format!("{s}")).collect();
        println!("| strategy | {} |", header.join(" | "));
        println!("|---|{}", "---|".repeat(sizes.len()));
        for strategy in STRATEGIES {
            let cells: Vec<String> = sizes
                .iter()
                .map(|&size| {
                    figures
                        .iter()
                        .find(|f| {
                            f.strategy == strategy && f.operation == operation && f.inbox == size
                        })
                        .map_or("-".to_owned(), |f| {
                            if f.commands == 1 {
                                format!("{:.1} ms", f.millis)
                            } else {
                                format!("{:.1} ms ({} cmds)", f.millis, f.commands)
                            }
                        })
                })
                .collect();
            if cells.iter().any(|c| c != "-") {
                println!("| {strategy} | {} |", cells.join(" | "));
            }
        }
    }
}
