//! "Who to follow": recommendations from a small follow graph, with their reasons and what each
//! call costs, then a dismissal and a block.
//!
//! ```text
//! cargo run --example who_to_follow
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (or mongo-java-server, with
//! `MONGO_SOCIAL_SERVER=mongo-java-server`, which has `$graphLookup`). Prints each page of
//! recommendations with its reasons, and the commands and documents each call read.

use mongo_social::graph::{FollowGraph, RecommendOptions};
use mongo_social::PageRequest;

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, info } =
        common::connect("mongo_social_who_to_follow").await?;
    let graph = FollowGraph::builder(&db)
        .recommendations(RecommendOptions::default().group_boost(1))
        .build()?;
    graph.create_indexes().await?;

    let people = [
        "ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal", "ivy", "star",
    ];
    for person in people {
        graph.add_user(person).await?;
    }
    graph.add_group("rust").await?;
    for member in ["ann", "ivy"] {
        graph.add_member("rust", member).await?;
    }
    // ann follows bob, cat and dan; they follow others. Everyone follows star.
    for (owner, user) in [
        ("ann", "bob"),
        ("ann", "cat"),
        ("ann", "dan"),
        ("bob", "eve"),
        ("bob", "fay"),
        ("cat", "eve"),
        ("cat", "gus"),
        ("dan", "eve"),
        ("dan", "ivy"),
        ("dan", "hal"),
        ("bob", "ann"),
    ] {
        graph.follow(owner, user).await?;
    }
    for fan in ["bob", "cat", "dan", "eve", "fay", "gus", "hal", "ivy"] {
        graph.follow(fan, "star").await?;
    }

    let read = if info.capabilities().graph_lookup {
        "one $graphLookup aggregate, then the checks"
    } else {
        "finds (no $graphLookup here), then the checks"
    };
    println!("ann follows bob, cat and dan; recommendations for ann ({read}):");
    let mut request = PageRequest::first(3);
    loop {
        let (page, names) = commands
            .measure(graph.recommendations("ann", request))
            .await;
        let page = page?;
        println!(
            "  page: {} commands {names:?}, {} documents read",
            names.len(),
            commands.documents_read()
        );
        for candidate in &page.items {
            println!(
                "    {:<5} score {}  {}",
                candidate.user,
                candidate.score,
                candidate.reason()
            );
        }
        match page.next {
            Some(next) => request = PageRequest::after(3, next),
            None => break,
        }
    }

    let (_, names) = commands.measure(graph.dismiss("ann", "star")).await;
    println!("\nann dismisses star {names:?}");
    let (_, names) = commands.measure(graph.block("ann", "fay")).await;
    println!("ann blocks fay {names:?}");
    let (_, names) = commands.measure(graph.follow("ann", "gus")).await;
    println!("ann follows gus {names:?}");
    let (page, names) = commands
        .measure(graph.recommendations("ann", PageRequest::first(10)))
        .await;
    println!("recommendations for ann now {names:?}:");
    for candidate in page?.items {
        println!("    {candidate}");
    }
    match graph.follow("fay", "ann").await {
        Err(error) => println!("fay follows ann: {error}"),
        Ok(_) => println!("fay follows ann: allowed (unexpected)"),
    }
    Ok(())
}
