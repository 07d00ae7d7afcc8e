//! The social feed end to end: users and posts, likes, a rename, the latest, hot and personal
//! feeds, and a search, with the commands each step sent.
//!
//! ```text
//! cargo run --example social_feed
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time).

use std::sync::Arc;
use std::time::Duration;

use mongo_social::feed::{FeedKind, FeedStore, Media, NewPost, NewUser, SearchOrder};
use mongo_social::graph::FollowList;
use mongo_social::{feed::Post, PageRequest};
use mongo_social_lab::CommandCounter;
use serde::{Deserialize, Serialize};

mod common;

/// What this application adds to a post.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Tags {
    tags: Vec<String>,
}

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, info } = common::connect("mongo_social_feed").await?;

    // bob follows ann and cat; dan follows ann.
    let follows = Arc::new(FollowList::from_pairs([
        ("bob", "ann"),
        ("bob", "cat"),
        ("dan", "ann"),
    ]));
    let store: FeedStore<Tags> = FeedStore::builder(&db)
        .follows(follows)
        .capabilities(info.capabilities())
        .build()?;
    store.create_indexes().await?;

    for id in ["ann", "bob", "cat", "dan"] {
        store.users().create(NewUser::new(id, id)).await?;
    }

    let drafts = [
        (
            "ann",
            "Sunrise at the coast",
            "Up early for the light.",
            "photo",
        ),
        (
            "cat",
            "Rust borrow checker tips",
            "Lifetimes, explained with boxes.",
            "rust",
        ),
        (
            "ann",
            "Tide pools",
            "Crabs, anemones and a very patient starfish.",
            "nature",
        ),
        (
            "bob",
            "Sourdough, week 3",
            "The starter finally rises.",
            "food",
        ),
        (
            "cat",
            "Async Rust in practice",
            "Tokio, tasks and cancellation.",
            "rust",
        ),
    ];
    let mut posts = Vec::new();
    for (author, title, body, tag) in drafts {
        let new = NewPost::new(
            author,
            title,
            body,
            Tags {
                tags: vec![tag.to_owned()],
            },
        )
        .image(Media::new(format!("https://img.example/{tag}.png"), title));
        let (post, names) = commands.measure(store.posts().create(new)).await;
        let post = post?;
        println!("post {:<28} by {:<4} {names:?}", post.title, author);
        posts.push(post);
    }

    let likes = [
        (0, "bob"),
        (0, "cat"),
        (0, "dan"),
        (4, "ann"),
        (4, "bob"),
        (2, "dan"),
    ];
    for (index, user) in likes {
        let (liked, names) = commands
            .measure(store.likes().like(posts[index].id, user))
            .await;
        println!(
            "{user:>4} likes {:<28} {} {names:?}",
            posts[index].title, liked?
        );
    }
    let (again, names) = commands
        .measure(store.likes().like(posts[0].id, "bob"))
        .await;
    println!(" bob likes it again: counted {} {names:?}", again?);
    let counters = store.likes().counters(posts[0].id).await?;
    println!("counters of {:?}: {counters:?}\n", posts[0].title);

    let (renamed, names) = commands
        .measure(store.users().rename("ann", "ann_sea"))
        .await;
    let renamed = renamed?;
    println!(
        "ann renamed to ann_sea: {} copies updated in {} batches {names:?}\n",
        renamed.updated, renamed.batches
    );

    // The feeds are built by background jobs, queued by each post (and here, a hot refresh).
    // The worker starts only now so the command counts above are the operations' own.
    store.feeds().schedule_hot_refresh().await?;
    let worker = store.start_worker();
    store.wait_until_drained(Duration::from_secs(30)).await?;
    worker.stop().await;

    print_feed(&store, &commands, "latest", &FeedKind::Latest).await?;
    print_feed(&store, &commands, "hot (24 h)", &FeedKind::Hot).await?;
    print_feed(&store, &commands, "bob's", &FeedKind::User("bob".into())).await?;
    print_feed(&store, &commands, "dan's", &FeedKind::User("dan".into())).await?;

    for order in [SearchOrder::Newest, SearchOrder::BestMatch] {
        let (page, names) = commands
            .measure(store.search().page("rust", order, PageRequest::first(10)))
            .await;
        println!("search \"rust\", {order:?} {names:?}");
        for post in page?.items {
            print_post(&post);
        }
    }
    Ok(())
}

/// Prints a feed two posts a page, following the cursor, with the commands each page cost.
async fn print_feed(
    store: &FeedStore<Tags>,
    commands: &CommandCounter,
    name: &str,
    feed: &FeedKind,
) -> common::ExampleResult {
    println!("{name} feed:");
    let mut request = PageRequest::first(2);
    loop {
        let (page, names) = commands.measure(store.feeds().page(feed, request)).await;
        let page = page?;
        println!("  page {names:?}");
        for post in &page.items {
            print_post(post);
        }
        match page.next {
            Some(cursor) => request = PageRequest::after(2, cursor),
            None => break,
        }
    }
    println!();
    Ok(())
}

fn print_post(post: &Post<Tags>) {
    println!(
        "    {} {:<28} by {:<8} {:?}",
        post.created.to_chrono().format("%H:%M:%S%.3f"),
        post.title,
        post.created_by.username,
        post.extension.tags
    );
}
