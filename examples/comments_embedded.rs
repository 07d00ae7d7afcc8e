//! A threaded discussion embedded in one document, printed as an indented tree.
//!
//! ```text
//! cargo run --example comments_embedded
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Also shows the typed error
//! a discussion gets when it would outgrow its document.

use mongo_social::comments::{Author, CommentStore, Embedded, NewComment};

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_comments_embedded").await?;
    let store = Embedded::new(&db);
    common::comments_demo(&store, "article-1", &commands).await?;

    // A small document limit, to show the error without writing 16 MiB.
    let small = Embedded::builder(&db)
        .discussions_collection("small_discussions")
        .max_document_bytes(2048)
        .build()?;
    small.create_discussion("busy").await?;
    let mut posted = 0;
    loop {
        let comment = NewComment::new(Author::new("troll", "Troll"), "me too ".repeat(40));
        match small.post("busy", comment).await {
            Ok(_) => posted += 1,
            Err(error) => {
                println!("after {posted} comments in a 2 KiB document: {error}");
                break;
            }
        }
    }
    Ok(())
}
