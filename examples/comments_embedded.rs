//! A threaded discussion embedded whole in one document: replies nest by position, the page
//! reads one document, and the 16 MiB limit is a typed error before the server's.
//!
//! ```text
//! cargo run --example comments_embedded
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Shows the position links
//! replies get (`0`, `0.0`, `0.0.1`), the stored document, the threaded view, and the error a
//! discussion meets when its document is full (with a 2 KiB limit, to keep it short).

use bson::{doc, Document};
use mongo_social::comments::{Author, CommentStore, Embedded, NewComment, Order, ThreadedComments};
use mongo_social::PageRequest;

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_comments_embedded").await?;
    let store = Embedded::new(&db);
    store.create_indexes().await?;
    store.create_discussion("article-1").await?;
    let beth = Author::new("beth", "Beth");
    let summer = Author::new("summer", "Summer");

    println!("== posts and replies, addressed by position ==");
    let (post, names) = commands
        .measure(store.post(
            "article-1",
            NewComment::new(beth.clone(), "Language, Rick."),
        ))
        .await;
    let post = post?;
    println!("  post  {:<8} {names:?}", post.link);
    let (reply, names) = commands
        .measure(store.reply(
            "article-1",
            &post.link,
            NewComment::new(summer.clone(), "He never listens."),
        ))
        .await;
    let reply = reply?;
    println!("  reply {:<8} {names:?}", reply.link);
    for text in ["Nobody does.", "I do!"] {
        let nested = store
            .reply(
                "article-1",
                &reply.link,
                NewComment::new(beth.clone(), text),
            )
            .await?;
        println!("  reply {}", nested.link);
    }
    store
        .post(
            "article-1",
            NewComment::new(summer, "Anyway, great episode."),
        )
        .await?;

    let stored = db
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": "article-1" })
        .projection(doc! { "slots": 1, "bytes": 1, "comments.text": 1, "comments.replies.text": 1 })
        .await?;
    println!(
        "\nthe discussion's one document (abridged): {}",
        stored.unwrap_or_default()
    );

    let (page, names) = commands
        .measure(store.thread_page("article-1", Order::OldestFirst, PageRequest::first(10)))
        .await;
    println!("\n== the threaded view, one `find` of one document {names:?} ==");
    for comment in page?.items {
        println!(
            "  {:<6}{}{}: {}",
            comment.link,
            "  ".repeat(comment.depth),
            comment.author.name,
            comment.text
        );
    }

    // A small document limit, to show the error without writing 16 MiB.
    let small = Embedded::builder(&db)
        .collection("discussions", "small_discussions")
        .max_document_bytes(2048)
        .build()?;
    small.create_discussion("busy").await?;
    let mut posted = 0;
    loop {
        let comment = NewComment::new(Author::new("troll", "Troll"), "me too ".repeat(40));
        match small.post("busy", comment).await {
            Ok(_) => posted += 1,
            Err(error) => {
                println!("\nafter {posted} comments in a 2 KiB document: {error}");
                break;
            }
        }
    }
    Ok(())
}
