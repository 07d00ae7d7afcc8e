//! Moving a running application's discussions from embedded documents to one document per
//! comment.
//!
//! ```text
//! cargo run --example migrate_comments
//! MONGO_SOCIAL_SERVER=documentdb cargo run --release --example migrate_comments
//! ```
//!
//! Fills an [`Embedded`] store with threaded discussions, starts a [`CommentMigration`] to a
//! [`PerComment`] store, and copies discussion by discussion with a background worker while a
//! task keeps posting, replying and voting through the migrating store; prints the copy's
//! progress as it goes, finishes the migration, and shows a link given out before it still
//! reaching its comment (now stored under another link).

mod common;

use std::sync::Arc;
use std::time::Duration;

use mongo_social::comments::{Author, Embedded, NewComment, PerComment, Vote};
use mongo_social::migrate::CommentMigration;
use mongo_social::prelude::*;

const DISCUSSIONS: usize = 20;

#[tokio::main]
async fn main() -> common::ExampleResult {
    let connection = common::connect("mongo_social_migrate_comments").await?;
    let db = connection.db;
    let source = Arc::new(Embedded::builder(&db).collection_prefix("v1_").build()?);
    let target = Arc::new(PerComment::builder(&db).collection_prefix("v2_").build()?);
    source.create_indexes().await?;
    let rick = Author::new("u1", "Rick");
    let morty = Author::new("u2", "Morty");
    let mut first_links = Vec::new();
    for d in 0..DISCUSSIONS {
        let discussion = format!("article-{d:02}");
        source.create_discussion(&discussion).await?;
        let first = source
            .post(
                &discussion,
                NewComment::new(rick.clone(), format!("First on {d}")),
            )
            .await?;
        for i in 0..9 {
            let reply = NewComment::new(morty.clone(), format!("Reply {i}"));
            let reply = source.reply(&discussion, &first.link, reply).await?;
            source
                .vote(&discussion, &reply.link, "u1", Vote::Up)
                .await?;
        }
        first_links.push((discussion, first.link));
    }
    println!(
        "source (embedded): {DISCUSSIONS} discussions, article-00 holds {} comments",
        source.count("article-00").await?
    );

    let migration =
        CommentMigration::builder(&db, "comments_v2", source.clone(), target.clone()).build()?;
    let comments = migration.store();
    migration.start().await?;
    let worker = migration.start_worker();

    // The application goes on meanwhile, through the migrating store (the source's links).
    let writing = {
        let comments = comments.clone();
        let first_links = first_links.clone();
        tokio::spawn(async move {
            for i in 0..100 {
                let (discussion, first) = &first_links[i % DISCUSSIONS];
                let said = NewComment::new(Author::new("u3", "Summer"), format!("live {i}"));
                let posted = match comments.threaded() {
                    Some(threads) if i % 2 == 0 => threads.reply(discussion, first, said).await?,
                    _ => comments.post(discussion, said).await?,
                };
                comments
                    .vote(discussion, &posted.link, "u2", Vote::Up)
                    .await?;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<(), mongo_social::Error>(())
        })
    };
    loop {
        let progress = migration.progress().await?;
        println!(
            "  discussions {}/{}{}, {} comments copied, {:.0} comments/s, {}",
            progress.discussions_done,
            progress.discussions_total,
            if progress.listed { "" } else { " (listing)" },
            progress.comments_copied,
            progress.rate,
            progress
                .time_left
                .map_or("time left unknown".to_owned(), |left| format!(
                    "{:.1} s left",
                    left.as_secs_f64()
                )),
        );
        if writing.is_finished() && migration.is_copied().await? {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    writing.await??;
    worker.stop().await;
    migration.finish().await?;

    let mut equal = 0;
    for (discussion, _) in &first_links {
        let (from, to) = (
            source.count(discussion).await?,
            target.count(discussion).await?,
        );
        if from == to {
            equal += 1;
        } else {
            println!("  {discussion}: source {from}, target {to}");
        }
    }
    let (discussion, old) = &first_links[0];
    let found = comments.get(discussion, old).await?;
    println!(
        "finished: {equal} of {DISCUSSIONS} discussions hold the same comments in both stores; \
         the old link {old} of {discussion} still reads {:?} through the migration's store, \
         stored under {}",
        found.text, found.link
    );
    if equal != DISCUSSIONS {
        return Err("some discussions differ".into());
    }
    Ok(())
}
