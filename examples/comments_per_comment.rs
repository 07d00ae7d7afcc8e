//! A threaded discussion stored one document per comment, printed as an indented tree.
//!
//! ```text
//! cargo run --example comments_per_comment
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Also shows a direct link
//! and a sub-thread, and the commands each operation sent.

use mongo_social::comments::{CommentQuery, CommentStore, PerComment};

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_comments_per_comment").await?;
    let store = PerComment::new(&db);
    common::comments_demo(&store, "article-1", &commands).await?;

    let threads = store.threaded().expect("per-comment stores thread");
    let first = threads
        .thread_page("article-1", &CommentQuery::oldest_first(2))
        .await?
        .comments
        .remove(1);
    let (linked, names) = commands.measure(store.get("article-1", &first.link)).await;
    println!("direct link {} {names:?}: {:?}", first.link, linked?.text);
    let (sub, names) = commands
        .measure(threads.sub_thread("article-1", &first.link, &CommentQuery::oldest_first(10)))
        .await;
    println!("sub-thread of {} {names:?}:", first.link);
    for comment in sub?.comments {
        println!("  {}{}", "  ".repeat(comment.depth), comment.link);
    }
    Ok(())
}
