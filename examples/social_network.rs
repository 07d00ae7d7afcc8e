//! A small social network: direct follows, a group, one celebrity and one dormant user; posts
//! delivered by background workers; timelines printed; and the time and commands it takes to
//! deliver one post to N followers.
//!
//! ```text
//! cargo run --release --example social_network
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_social::delivery::Delivery;
use mongo_social::graph::FollowGraph;
use mongo_social::{FanOutOnWrite, PageRequest};

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_social_network").await?;
    let graph = Arc::new(FollowGraph::new(&db));
    graph.create_indexes().await?;
    let delivery: Delivery<String> =
        Delivery::builder(&db, graph.clone(), Arc::new(FanOutOnWrite::new(&db)))
            .celebrity_followers(Some(4))
            .backfill(2)
            .build()?;
    delivery.create_indexes().await?;

    let people = ["ann", "bob", "cat", "dan", "eve", "zed", "star"];
    for person in people {
        graph.add_user(person).await?;
    }
    graph.add_group("climbers").await?;
    graph.add_member("climbers", "ann").await?;
    graph.add_member("climbers", "cat").await?;
    for person in ["ann", "bob", "cat", "dan", "eve", "zed"] {
        if person != "star" {
            graph.follow(person, "star").await?; // star has 6 followers: a celebrity from 4
        }
    }
    graph.follow_group("bob", "climbers").await?;
    graph.follow("dan", "bob").await?;
    graph.follow("zed", "ann").await?;
    for person in ["ann", "bob", "cat", "dan", "eve", "star"] {
        delivery.touch(person).await?;
    }
    // zed was last seen a month ago: dormant.
    let month_ago =
        bson::DateTime::from_millis(bson::DateTime::now().timestamp_millis() - 30 * 86_400_000);
    db.collection::<bson::Document>("user_activity")
        .update_one(
            doc! { "_id": "zed" },
            doc! { "$set": { "last_seen": month_ago } },
        )
        .upsert(true)
        .await?;

    for (author, text) in [
        ("ann", "Sent the north face today"),
        ("star", "New album out Friday"),
        ("bob", "Who's up for bouldering?"),
        ("cat", "Chalk is on me"),
        ("star", "Tour dates announced"),
    ] {
        let (posted, names) = commands
            .measure(delivery.post(author, text.to_owned()))
            .await;
        posted?;
        println!("{author:>5} posts {text:?} {names:?}");
    }
    // Workers start after the posts here, so the commands above are the posts' own.
    let workers: Vec<_> = (0..2).map(|_| delivery.start_worker()).collect();
    delivery.wait_until_drained(Duration::from_secs(60)).await?;
    println!(
        "\nstar is a celebrity (posts merged at read time): {}",
        delivery.is_celebrity("star").await?
    );

    for reader in ["bob", "dan"] {
        let (page, names) = commands
            .measure(delivery.timeline(reader, PageRequest::first(10)))
            .await;
        println!("\n{reader}'s timeline {names:?}:");
        for message in page?.items {
            println!("  {:>5}: {}", message.from, message.payload);
        }
    }
    println!("\nzed comes back after a month (dormant: received no copies)...");
    println!("  returning: {}", delivery.touch("zed").await?);
    let page = delivery.timeline("zed", PageRequest::first(10)).await?;
    println!("  zed's timeline while the inbox rebuilds (read from the outbox):");
    for message in &page.items {
        println!("  {:>5}: {}", message.from, message.payload);
    }
    delivery.wait_until_drained(Duration::from_secs(60)).await?;
    println!("  zed's inbox after the rebuild holds {} posts", {
        delivery.inbox().count("zed").await?
    });
    for worker in workers {
        worker.stop().await;
    }

    println!("\ntime to deliver one post to N followers (2 workers, 500 followers per job):");
    for n in [100_usize, 1_000, 2_000] {
        let author = format!("author{n}");
        graph.add_user(&author).await?;
        let now = bson::DateTime::now();
        let fans: Vec<String> = (0..n).map(|i| format!("f{n}_{i:05}")).collect();
        // The graph's documented layout, written in bulk so the setup takes seconds.
        db.collection::<bson::Document>("graph_users")
            .insert_many(
                fans.iter()
                    .map(|fan| doc! { "_id": fan, "followers": 0_i64, "following": 1_i64 }),
            )
            .await?;
        db.collection::<bson::Document>("subscriptions")
            .insert_many(
                fans.iter().map(
                    |fan| doc! { "owner": fan, "user": &author, "origins": ["!"], "since": now },
                ),
            )
            .await?;
        db.collection::<bson::Document>("user_activity")
            .insert_many(fans.iter().map(|fan| doc! { "_id": fan, "last_seen": now }))
            .await?;
        let workers: Vec<_> = (0..2).map(|_| delivery.start_worker()).collect();
        commands.reset();
        let started = Instant::now();
        delivery.post(&author, "measured".to_owned()).await?;
        delivery
            .wait_until_drained(Duration::from_secs(300))
            .await?;
        let elapsed = started.elapsed();
        let sent = commands.snapshot();
        for worker in workers {
            worker.stop().await;
        }
        println!(
            "  N = {n:>5}: {:>7.1} ms; commands by name (idle polling included): {sent:?}",
            elapsed.as_secs_f64() * 1000.0
        );
    }
    Ok(())
}
