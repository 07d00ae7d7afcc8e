//! A flat discussion stored in pages of comments (the hybrid design), read page by page.
//!
//! ```text
//! cargo run --example comments_hybrid
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Pages hold 3 comments here
//! (100 by default) so the discussion spans several page documents.

use mongo_social::comments::HybridPages;

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_comments_hybrid").await?;
    let store = HybridPages::builder(&db).page_size(3).build()?;
    common::comments_demo(&store, "article-1", &commands).await?;
    println!("page documents (page, comments):");
    for (page, count) in store.page_counts("article-1").await? {
        println!("  {page}: {count}");
    }
    Ok(())
}
