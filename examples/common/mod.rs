//! Shared by the examples: connecting to the local default server and printing an inbox.
//! Each example uses part of it, so unused items are expected per example.
#![allow(dead_code)]

use mongo_social::testing::{self, CommandCounter};
use mongo_social::{DynInboxStore, Message, PageRequest, ServerInfo};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};

/// What the examples' `main` returns.
pub type ExampleResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// A connection to `MONGODB_URI` (or the fixture's private FerretDB) with a [`CommandCounter`]
/// attached, and a freshly dropped database for the example.
pub struct Connection {
    pub db: Database,
    pub commands: CommandCounter,
    pub info: ServerInfo,
}

/// Connects, prints which server answered, and drops `database` so each run starts clean.
pub async fn connect(database: &str) -> ExampleResult<Connection> {
    let commands = CommandCounter::new();
    let mut options = ClientOptions::parse(testing::server_uri()).await?;
    commands.attach(&mut options);
    let client = Client::with_options(options)?;
    let db = client.database(database);
    db.drop().await?;
    let info = ServerInfo::detect(&client).await?;
    println!("server: {}\n", info.describe());
    Ok(Connection { db, commands, info })
}

/// Prints `owner`'s whole inbox, `page_size` messages a page, following the cursor, with the
/// commands each page cost; `line` prints one message.
pub async fn print_inbox(
    store: &DynInboxStore<String>,
    owner: &str,
    page_size: usize,
    commands: &CommandCounter,
    line: fn(&Message<String>),
) -> ExampleResult {
    let mut request = PageRequest::first(page_size);
    let mut page_number = 1;
    loop {
        let (page, names) = commands.measure(store.inbox_page(owner, request)).await;
        let page = page?;
        println!("  page {page_number} {names:?}");
        for message in &page.items {
            line(message);
        }
        match page.next {
            Some(cursor) => request = PageRequest::after(page_size, cursor),
            None => return Ok(()),
        }
        page_number += 1;
    }
}

/// `HH:MM:SS.mmm  sender: payload`.
pub fn print_message(message: &Message<String>) {
    println!(
        "    {} {:>5}: {}",
        message.sent.to_chrono().format("%H:%M:%S%.3f"),
        message.from,
        message.payload
    );
}

/// A short conversation: `(reply to the n-th line, or None, author, text)`.
const CONVERSATION: &[(Option<usize>, &str, &str)] = &[
    (None, "rick", "This is so bogus."),
    (Some(0), "morty", "Why, what happened?"),
    (Some(1), "rick", "The portal gun jammed again."),
    (None, "summer", "Can we talk about the ending?"),
    (Some(0), "beth", "Language, Rick."),
    (Some(3), "morty", "No spoilers please!"),
    (Some(2), "summer", "Did you try turning it off and on?"),
    (None, "jerry", "I liked it."),
];

/// Posts [`CONVERSATION`] to `discussion` (replies as top-level comments where the design has
/// no threads), prints the commands of the first post and reply, then the discussion as an
/// indented tree (or a list), newest thread first, and the count after an edit and a delete.
pub async fn comments_demo(
    store: &dyn mongo_social::comments::CommentStore,
    discussion: &str,
    commands: &CommandCounter,
) -> ExampleResult {
    use mongo_social::comments::{Author, CommentQuery, NewComment, Order};

    store.create_indexes().await?;
    store.create_discussion(discussion).await?;
    println!("== {} ==", store.design());
    let mut links: Vec<String> = Vec::new();
    for (parent, who, text) in CONVERSATION {
        let comment = NewComment::new(Author::new(*who, capitalize(who)), *text);
        let (posted, names) = match (parent, store.threaded()) {
            (Some(parent), Some(threads)) => {
                commands
                    .measure(threads.reply(discussion, &links[*parent], comment))
                    .await
            }
            _ => commands.measure(store.post(discussion, comment)).await,
        };
        let posted = posted?;
        println!(
            "  {:<8} {:<34} {names:?}",
            who,
            format!("-> {}", posted.link)
        );
        links.push(posted.link);
    }

    let edited = store
        .edit(discussion, &links[7], "I liked it. (Edited: loved it.)")
        .await?;
    println!("\n  edited {}", edited.link);
    let deleted = store.delete(discussion, &links[0]).await?;
    println!("  deleting {}: {deleted:?}", links[0]);

    let mut query = CommentQuery {
        order: Order::NewestFirst,
        limit: 4,
        after: None,
    };
    println!("\n  newest thread first, 4 per page:");
    loop {
        let (page, names) = match store.threaded() {
            Some(threads) => {
                commands
                    .measure(threads.thread_page(discussion, &query))
                    .await
            }
            None => {
                commands
                    .measure(store.chronological(discussion, &query))
                    .await
            }
        };
        let page = page?;
        println!("  -- page {names:?}");
        for comment in &page.comments {
            let text = if comment.deleted {
                "[deleted]"
            } else {
                &comment.text
            };
            let edited = if comment.edited.is_some() {
                " (edited)"
            } else {
                ""
            };
            println!(
                "  {}{}: {text}{edited}",
                "    ".repeat(comment.depth + 1),
                comment.author.name
            );
        }
        match page.next {
            Some(next) => query = query.after(next),
            None => break,
        }
    }
    let (count, names) = commands.measure(store.count(discussion)).await;
    println!(
        "\n  {} comments (not counting deleted ones) {names:?}\n",
        count?
    );
    Ok(())
}

fn capitalize(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
