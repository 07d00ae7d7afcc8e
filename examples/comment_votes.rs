//! Up and down votes on a discussion's comments, and the four sorts Reddit offers ("best", "hot",
//! "top", "controversial"), in each comment strategy, with the commands every call sent.
//!
//! ```text
//! cargo run --example comment_votes
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB. For each strategy: a
//! discussion of six comments (and, where the strategy threads, three replies to the first),
//! votes cast, changed and taken back, then each sort's first page, and the replies of the first
//! comment ranked within it.

use std::sync::Arc;

use mongo_social::comments::{
    Author, Comment, DynCommentStore, Embedded, HybridPages, NewComment, PerComment, Sort, Vote,
};
use mongo_social::PageRequest;

mod common;

const DISCUSSION: &str = "article-1";

/// The discussion: each comment's text and the ups and downs it gets.
const COMMENTS: [(&str, u64, u64); 6] = [
    ("Twenty up, fifteen down: loved and hated.", 20, 15),
    ("Four up, none down.", 4, 0),
    ("Three each way.", 3, 3),
    ("Two down.", 0, 2),
    ("Two up.", 2, 0),
    ("Two up, five down.", 2, 5),
];

/// The replies to the first comment, where the strategy threads.
const REPLIES: [(&str, u64, u64); 3] = [
    ("A reply three people like.", 3, 0),
    ("A reply two people don't.", 0, 2),
    ("A reply that splits two.", 1, 1),
];

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_comment_votes").await?;
    let stores: [Arc<DynCommentStore>; 3] = [
        Arc::new(PerComment::new(&db)),
        Arc::new(Embedded::new(&db)),
        Arc::new(HybridPages::new(&db)),
    ];
    for store in stores {
        println!("==== {} ====", store.strategy());
        store.create_indexes().await?;
        store.create_discussion(DISCUSSION).await?;
        let rick = Author::new("rick", "Rick");
        let mut links = Vec::new();
        for (text, ups, downs) in COMMENTS {
            let comment = store
                .post(DISCUSSION, NewComment::new(rick.clone(), text))
                .await?;
            cast(&*store, &comment.link, ups, downs).await?;
            links.push(comment.link);
        }
        if let Some(threads) = store.threaded() {
            for (text, ups, downs) in REPLIES {
                let reply = threads
                    .reply(DISCUSSION, &links[0], NewComment::new(rick.clone(), text))
                    .await?;
                cast(&*store, &reply.link, ups, downs).await?;
            }
        }

        println!("-- one user's vote on the second comment --");
        let second = &links[1];
        let calls: [(&str, Option<Vote>); 4] = [
            ("vote up", Some(Vote::Up)),
            ("vote up again", Some(Vote::Up)),
            ("change to down", Some(Vote::Down)),
            ("take it back", None),
        ];
        for (what, vote) in calls {
            let (before, names) = match vote {
                Some(vote) => {
                    commands
                        .measure(store.vote(DISCUSSION, second, "morty", vote))
                        .await
                }
                None => {
                    commands
                        .measure(store.retract_vote(DISCUSSION, second, "morty"))
                        .await
                }
            };
            let votes = store.get(DISCUSSION, second).await?.votes;
            println!(
                "  {what:<15} was {:<10} now {:>2} up {:>2} down  {names:?}",
                format!("{:?}", before?),
                votes.ups,
                votes.downs
            );
        }

        for sort in Sort::ALL {
            let (page, names) = commands
                .measure(store.ranked(DISCUSSION, None, sort, PageRequest::first(6)))
                .await;
            println!("-- {sort} {names:?} --");
            print_ranked(&page?.items, sort);
        }
        if store.threaded().is_some() {
            for sort in [Sort::Best, Sort::Controversial] {
                let (page, names) = commands
                    .measure(store.ranked(
                        DISCUSSION,
                        Some(&links[0]),
                        sort,
                        PageRequest::first(10),
                    ))
                    .await;
                println!("-- replies to the first comment, {sort} {names:?} --");
                print_ranked(&page?.items, sort);
            }
        } else {
            println!(
                "-- (no replies: {} keeps discussions flat) --",
                store.strategy()
            );
        }
        println!();
    }
    Ok(())
}

/// `ups` users vote the comment at `link` up and `downs` others down.
async fn cast(
    store: &DynCommentStore,
    link: &str,
    ups: u64,
    downs: u64,
) -> mongo_social::Result<()> {
    for i in 0..ups + downs {
        let vote = if i < ups { Vote::Up } else { Vote::Down };
        store
            .vote(DISCUSSION, link, &format!("user{i}"), vote)
            .await?;
    }
    Ok(())
}

fn print_ranked(comments: &[Comment], sort: Sort) {
    for comment in comments {
        println!(
            "  {:>9.4}  {:>2} up {:>2} down  {}",
            sort.key(comment.votes, comment.posted),
            comment.votes.ups,
            comment.votes.downs,
            comment.text
        );
    }
}
