//! A small follow graph: direct follows, groups with overlapping members, one celebrity, and
//! the subscriptions, counts and rebuilds that follow from them.
//!
//! ```text
//! cargo run --example follow_graph
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Prints whom each user
//! follows and by which routes, follower counts, and the commands each operation sent.

use mongo_social::graph::{FollowGraph, Origin};
use mongo_social::PageRequest;

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_follow_graph").await?;
    let graph = FollowGraph::new(&db);
    graph.create_indexes().await?;

    let people = ["ann", "bob", "cat", "dan", "eve", "star"];
    for person in people {
        graph.add_user(person).await?;
    }
    for (group, members) in [("rust", ["cat", "dan"]), ("mongo", ["dan", "eve"])] {
        graph.add_group(group).await?;
        for member in members {
            graph.add_member(group, member).await?;
        }
    }
    let (followed, names) = commands.measure(graph.follow("ann", "bob")).await;
    println!("ann follows bob (new: {}) {names:?}", followed?);
    graph.follow("ann", "cat").await?;
    let (_, names) = commands.measure(graph.follow_group("ann", "rust")).await;
    println!("ann follows the rust group {names:?}");
    graph.follow_group("ann", "mongo").await?;
    for fan in ["ann", "bob", "cat", "dan", "eve"] {
        graph.follow(fan, "star").await?;
    }

    for person in ["ann", "dan"] {
        let (page, names) = commands
            .measure(graph.following(person, PageRequest::first(50)))
            .await;
        println!("\n{person} follows {names:?}:");
        for subscription in page?.items {
            let routes: Vec<String> = subscription.origins.iter().map(Origin::to_string).collect();
            println!("  {:<5} via {}", subscription.user, routes.join(", "));
        }
    }
    println!();
    for person in people {
        let stats = graph.stats(person).await?;
        println!(
            "{person:<5} {} followers, follows {}",
            stats.followers, stats.following
        );
    }

    graph.remove_member("mongo", "dan").await?;
    let dan = graph.subscription("ann", "dan").await?;
    println!(
        "\nafter dan leaves the mongo group, ann follows dan via {:?}",
        dan.map(|s| s.origins)
    );
    let (report, names) = commands.measure(graph.rebuild("ann")).await;
    println!(
        "rebuilding ann's subscriptions from her relations: {:?} {names:?}",
        report?
    );
    Ok(())
}
