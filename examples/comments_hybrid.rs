//! A long flat discussion in pages of comments (the manual's hybrid strategy), read page by page
//! with a cursor.
//!
//! ```text
//! cargo run --example comments_hybrid
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Pages hold 3 comments here
//! (100 by default) so the page documents show: every page but the last is full, a page of
//! comments reads one or two page documents, and a direct link finds a comment by its slug.

use mongo_social::comments::{Author, CommentStore, HybridPages, NewComment, Order};
use mongo_social::PageRequest;

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_comments_hybrid").await?;
    let store = HybridPages::builder(&db).page_size(3).build()?;
    store.create_indexes().await?;
    store.create_discussion("article-1").await?;

    println!("== ten comments ==");
    let mut links = Vec::new();
    for n in 1..=10 {
        let author = Author::new(format!("u{}", n % 3), format!("User {}", n % 3));
        let (posted, names) = commands
            .measure(store.post("article-1", NewComment::new(author, format!("comment {n}"))))
            .await;
        let posted = posted?;
        println!("  {:<18} {names:?}", posted.link);
        links.push(posted.link);
    }
    println!("\npage documents (page, comments):");
    for (page, count) in store.page_counts("article-1").await? {
        println!("  {page}: {count}");
    }

    println!("\n== oldest first, 4 a page ==");
    let mut request = PageRequest::first(4);
    loop {
        let (page, names) = commands
            .measure(store.chronological("article-1", Order::OldestFirst, request))
            .await;
        let page = page?;
        let texts: Vec<&str> = page.items.iter().map(|c| c.text.as_str()).collect();
        println!("  {names:?} {texts:?}");
        match page.next {
            Some(next) => request = PageRequest::after(4, next),
            None => break,
        }
    }

    let (linked, names) = commands.measure(store.get("article-1", &links[6])).await;
    println!("\ndirect link {} {names:?}: {:?}", links[6], linked?.text);
    let (deleted, names) = commands.measure(store.delete("article-1", &links[1])).await;
    println!("delete {} {names:?}: {:?}", links[1], deleted?);
    let (count, names) = commands.measure(store.count("article-1")).await;
    println!("{} comments not deleted {names:?}", count?);
    Ok(())
}
