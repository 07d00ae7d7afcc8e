//! Grouped notifications and live updates: several users follow ann, like her post and reply to
//! her comment; ann's notification feed groups them ("bob, cat and 2 others liked your post"),
//! counts what she has not seen, and a watch prints each change as it happens. Every step prints
//! the commands it sent.
//!
//! ```text
//! cargo run --example notifications
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mongo_social::comments::PerComment;
use mongo_social::feed::{FeedStore, NewPost, NewUser};
use mongo_social::notifications::{Activity, Event, Group, Kind, NotificationStore};
use mongo_social::realtime::WatchOptions;
use mongo_social::{
    comments::Author, comments::ThreadedComments, CommentStore, FollowGraph, NewComment,
    PageRequest,
};

mod common;

/// "bob, cat and 2 others liked your post p1".
fn describe(group: &Group<String>) -> String {
    let names = group.actors.join(", ");
    let others = group.actor_count.saturating_sub(group.actors.len() as u64);
    let who = match others {
        0 => names,
        1 => format!("{names} and 1 other"),
        n => format!("{names} and {n} others"),
    };
    let what = match &group.kind {
        Kind::Like => format!("liked your post {}", group.target),
        Kind::Follow => "started following you".to_owned(),
        Kind::Reply => format!("replied to your comment {}", group.target),
        other => format!("{other} on {}", group.target),
    };
    let new = if group.seen { "" } else { " (new)" };
    let data = group
        .data
        .as_ref()
        .map(|data| format!(": {data}"))
        .unwrap_or_default();
    format!("{who} {what}{new}{data}")
}

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, info } = common::connect("mongo_social_notify").await?;

    // One notification store; the graph, the feed and the comments tell it what happens.
    let notifications: Arc<NotificationStore<String>> =
        Arc::new(NotificationStore::builder(&db).recent_actors(2).build()?);
    notifications.create_indexes().await?;
    let graph = FollowGraph::builder(&db)
        .notifier(notifications.clone())
        .build()?;
    graph.create_indexes().await?;
    let feed: FeedStore<()> = FeedStore::builder(&db)
        .notifier(notifications.clone())
        .capabilities(info.capabilities())
        .build()?;
    feed.create_indexes().await?;
    let comments = PerComment::builder(&db)
        .notifier(notifications.clone())
        .build()?;
    comments.create_indexes().await?;

    let people = ["ann", "bob", "cat", "dan", "eve"];
    for id in people {
        graph.add_user(id).await?;
        feed.users().create(NewUser::new(id, id)).await?;
    }
    let post = feed
        .posts()
        .create(NewPost::new(
            "ann",
            "Sunrise",
            "Up early for the light.",
            (),
        ))
        .await?;
    comments.create_discussion("sunrise").await?;
    let said = comments
        .post(
            "sunrise",
            NewComment::new(Author::new("ann", "Ann"), "Thanks all!"),
        )
        .await?;

    // ann watches her notifications from now on.
    let mut live = notifications.watch(
        "ann",
        None,
        WatchOptions::default().poll_interval(Duration::from_millis(100)),
    );
    println!(
        "ann's watch: {}",
        if info.capabilities().change_streams {
            "a change stream where it resumes, else one `find` per poll"
        } else {
            "one `find` per poll (this server has no change streams)"
        }
    );

    println!("\nwhat happens (commands per call):");
    for fan in ["bob", "cat", "dan", "eve"] {
        let (_, sent) = commands.measure(feed.likes().like(post.id, fan)).await;
        println!("  {fan} likes ann's post: {sent:?}");
    }
    for fan in ["bob", "cat"] {
        let (_, sent) = commands.measure(graph.follow(fan, "ann")).await;
        println!("  {fan} follows ann: {} commands", sent.len());
    }
    let (_, sent) = commands
        .measure(comments.reply(
            "sunrise",
            &said.link,
            NewComment::new(Author::new("dan", "Dan"), "Lovely"),
        ))
        .await;
    println!("  dan replies to ann's comment: {sent:?}");
    let badge = Event::new(Activity::new(
        "ann",
        Kind::Custom("badge".into()),
        "early-bird",
        "app",
    ))
    .with_data("Early bird: 5 sunrise posts".to_owned());
    let (_, sent) = commands.measure(notifications.notify(badge)).await;
    println!("  the app awards ann a badge: {sent:?}");
    let (_, sent) = commands.measure(feed.likes().unlike(post.id, "eve")).await;
    println!("  eve takes her like back: {sent:?}");

    println!("\nlive (each group that changed, in its newest state, once):");
    let mut last_token = None;
    while let Ok(Some(update)) =
        tokio::time::timeout(Duration::from_millis(1500), live.next()).await
    {
        let update = update?;
        println!("  {}", describe(&update.item));
        // A real application stores the token of the last update it handled, and watches
        // again from it after a restart.
        last_token = Some(update.token);
    }
    if let Some(token) = last_token {
        println!(
            "  (resume token: {} characters of text)",
            token.to_string().len()
        );
    }

    let (page, sent) = commands
        .measure(notifications.page("ann", PageRequest::first(10)))
        .await;
    println!("\nann's notifications, newest first ({sent:?}):");
    for group in &page?.items {
        println!("  {}", describe(group));
    }
    let (counts, sent) = commands.measure(notifications.counts("ann")).await;
    let counts = counts?;
    println!(
        "unseen {}, unread {} ({sent:?})",
        counts.unseen, counts.unread
    );
    let (_, sent) = commands.measure(notifications.mark_seen("ann", None)).await;
    let counts = notifications.counts("ann").await?;
    println!(
        "after marking them seen ({sent:?}): unseen {}, unread {}",
        counts.unseen, counts.unread
    );
    Ok(())
}
