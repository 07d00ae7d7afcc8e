//! A threaded discussion stored one document per comment, printed as an indented tree.
//!
//! ```text
//! cargo run --example comments_per_comment
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. Shows posts and replies
//! with the links they get, the threaded view paged by cursor, a direct link, a sub-thread, an
//! edit, a delete (a comment with replies becomes a tombstone) and the commands each call sent.

use mongo_social::comments::{
    Author, CommentStore, NewComment, Order, PerComment, ThreadedComments,
};
use mongo_social::PageRequest;

mod common;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_comments_per_comment").await?;
    let store = PerComment::new(&db);
    store.create_indexes().await?;
    store.create_discussion("article-1").await?;
    let rick = Author::new("rick", "Rick");
    let morty = Author::new("morty", "Morty");

    println!("== posts and replies, with the link each gets ==");
    let (first, names) = commands
        .measure(store.post(
            "article-1",
            NewComment::new(rick.clone(), "This is so bogus."),
        ))
        .await;
    let first = first?;
    println!("  post  {:<36} {names:?}", first.link);
    let (reply, names) = commands
        .measure(store.reply(
            "article-1",
            &first.link,
            NewComment::new(morty.clone(), "Why, what happened?"),
        ))
        .await;
    let reply = reply?;
    println!("  reply {:<36} {names:?}", reply.link);
    let deeper = store
        .reply(
            "article-1",
            &reply.link,
            NewComment::new(rick.clone(), "The portal gun jammed again."),
        )
        .await?;
    println!("  reply {}", deeper.link);
    let second = store
        .post(
            "article-1",
            NewComment::new(morty.clone(), "Can we talk about the ending?"),
        )
        .await?;
    store
        .reply(
            "article-1",
            &second.link,
            NewComment::new(rick, "No spoilers."),
        )
        .await?;

    println!("\n== the threaded view, newest thread first, 2 comments a page ==");
    let mut request = PageRequest::first(2);
    loop {
        let (page, names) = commands
            .measure(store.thread_page("article-1", Order::NewestFirst, request))
            .await;
        let page = page?;
        println!("  -- page {names:?}");
        for comment in &page.items {
            println!(
                "  {}{}: {}",
                "    ".repeat(comment.depth + 1),
                comment.author.name,
                comment.text
            );
        }
        match page.next {
            Some(next) => request = PageRequest::after(2, next),
            None => break,
        }
    }

    let (linked, names) = commands.measure(store.get("article-1", &reply.link)).await;
    println!("\ndirect link {} {names:?}: {:?}", reply.link, linked?.text);
    let (sub, names) = commands
        .measure(store.sub_thread("article-1", &first.link, PageRequest::first(10)))
        .await;
    println!("sub-thread of {} {names:?}:", first.link);
    for comment in sub?.items {
        println!("  {}{}", "  ".repeat(comment.depth), comment.link);
    }

    let (edited, names) = commands
        .measure(store.edit(
            "article-1",
            &second.link,
            "Can we talk about the ending? (Edited.)",
        ))
        .await;
    println!(
        "\nedit {} {names:?}: edited at {:?}",
        second.link, edited?.edited
    );
    let (deleted, names) = commands
        .measure(store.delete("article-1", &first.link))
        .await;
    println!(
        "delete {} {names:?}: {:?} (it has replies)",
        first.link, deleted?
    );
    let (count, names) = commands.measure(store.count("article-1")).await;
    println!("{} comments not deleted {names:?}", count?);
    Ok(())
}
