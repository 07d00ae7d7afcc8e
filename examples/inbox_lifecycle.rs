//! The inbox lifecycle, step by step, for each strategy: read state and unread counts, stars,
//! delete for me, edit and retract by the sender, mute and block, retention; with the commands
//! each call sent.
//!
//! ```text
//! cargo run --example inbox_lifecycle
//! ```
//!
//! Uses `MONGODB_URI` when set; otherwise starts a private FerretDB (installing it with Go the
//! first time), where writes also take a lock (+2 commands: its `insert` and `delete`).

use std::future::Future;
use std::sync::Arc;

use mongo_social::inbox::{DynInboxLifecycle, Retention, UpTo};
use mongo_social::{BucketedFanOut, FanOutOnRead, FanOutOnWrite, Message, NewMessage, PageRequest};
use mongo_social_lab::CommandCounter;

mod common;

/// Runs `call`, printing what it was, its outcome and the commands it sent.
async fn step<T: std::fmt::Debug>(
    commands: &CommandCounter,
    what: &str,
    call: impl Future<Output = mongo_social::Result<T>>,
) -> mongo_social::Result<T> {
    let (result, names) = commands.measure(call).await;
    let shown = match &result {
        Ok(value) => format!("{value:?}"),
        Err(error) => format!("error: {error}"),
    };
    let shown: String = shown.chars().take(40).collect();
    println!("  {what:<44} {shown:<42} {} {names:?}", names.len());
    result
}

/// `owner`'s inbox as one line: `*` unread, `+` starred, `(edited)`.
async fn show(inbox: &DynInboxLifecycle<String>, owner: &str) -> mongo_social::Result<()> {
    let page = inbox.inbox_page(owner, PageRequest::first(20)).await?;
    let shown: Vec<String> = page
        .items
        .iter()
        .map(|m| {
            format!(
                "{}{}{}{}",
                if m.read { "" } else { "*" },
                if m.starred { "+" } else { "" },
                m.payload,
                if m.edited.is_some() { " (edited)" } else { "" }
            )
        })
        .collect();
    println!(
        "    {owner}: {} shown, {} unread: {}",
        inbox.count(owner).await?,
        inbox.unread_count(owner).await?,
        shown.join(" | ")
    );
    Ok(())
}

async fn send(
    inbox: &DynInboxLifecycle<String>,
    from: &str,
    to: &[&str],
    text: &str,
) -> mongo_social::Result<Message<String>> {
    Ok(inbox
        .send(NewMessage::new(from, to.iter().copied(), text.to_owned()))
        .await?
        .message)
}

#[tokio::main]
async fn main() -> common::ExampleResult {
    let common::Connection { db, commands, .. } =
        common::connect("mongo_social_inbox_lifecycle").await?;
    let retention = Retention::keep_newest(4);
    // Each strategy in collections of its own (the filter lists would be shared otherwise).
    let stores: Vec<Arc<DynInboxLifecycle<String>>> = vec![
        Arc::new(
            FanOutOnRead::builder(&db)
                .collection_prefix("read_")
                .retention(retention)
                .build()?,
        ),
        Arc::new(
            FanOutOnWrite::builder(&db)
                .collection_prefix("write_")
                .retention(retention)
                .build()?,
        ),
        Arc::new(
            BucketedFanOut::builder(&db)
                .collection_prefix("buckets_")
                .bucket_size(2)
                .retention(retention)
                .build()?,
        ),
    ];
    for inbox in stores {
        inbox.create_indexes().await?;
        println!("== {} ==", inbox.strategy());
        let lunch = send(&*inbox, "ann", &["bob", "cat"], "lunch?").await?;
        let deploy = send(&*inbox, "joe", &["bob"], "deploy is green").await?;
        let keys = send(&*inbox, "joe", &["bob"], "who has the keys?").await?;
        inbox.count("bob").await?; // detection, not measured
        show(&*inbox, "bob").await?;

        step(&commands, "unread count", inbox.unread_count("bob")).await?;
        step(&commands, "mark one read", inbox.mark_read("bob", keys.id)).await?;
        step(&commands, "star", inbox.set_starred("bob", lunch.id, true)).await?;
        step(
            &commands,
            "mark one unread",
            inbox.mark_unread("bob", keys.id),
        )
        .await?;
        step(
            &commands,
            "mark read up to a message (and older)",
            inbox.mark_read_up_to("bob", UpTo::Message(deploy.id)),
        )
        .await?;
        show(&*inbox, "bob").await?;
        let page = inbox.inbox_page("bob", PageRequest::first(1)).await?;
        if let Some(cursor) = page.next {
            step(
                &commands,
                "mark read up to a page's cursor",
                inbox.mark_read_up_to("bob", UpTo::Cursor(cursor)),
            )
            .await?;
        }
        step(
            &commands,
            "mark everything read",
            inbox.mark_read_up_to("bob", UpTo::Newest),
        )
        .await?;

        step(
            &commands,
            "edit (the sender; every recipient)",
            inbox.edit("ann", lunch.id, "lunch at noon?".to_owned()),
        )
        .await?;
        step(
            &commands,
            "edit by someone else",
            inbox.edit("joe", lunch.id, "hijacked".to_owned()),
        )
        .await
        .ok();
        step(
            &commands,
            "delete for me (cat)",
            inbox.delete("cat", lunch.id),
        )
        .await?;
        show(&*inbox, "bob").await?;
        show(&*inbox, "cat").await?;
        step(
            &commands,
            "retract (the sender)",
            inbox.retract("joe", deploy.id),
        )
        .await?;

        step(&commands, "mute joe", inbox.mute("bob", "joe")).await?;
        send(&*inbox, "joe", &["bob"], "muted news").await?;
        show(&*inbox, "bob").await?;
        step(&commands, "unmute joe", inbox.unmute("bob", "joe")).await?;
        step(&commands, "block ann", inbox.block("bob", "ann")).await?;
        step(
            &commands,
            "send from ann to bob and cat",
            inbox.send(NewMessage::new("ann", ["bob", "cat"], "hello?".to_owned())),
        )
        .await
        .map(|sent| println!("    skipped: {:?}", sent.skipped))?;
        step(&commands, "filters", inbox.filters("bob")).await?;
        show(&*inbox, "bob").await?;

        for i in 0..4 {
            send(&*inbox, "zed", &["bob"], &format!("note {i}")).await?;
        }
        step(&commands, "prune (keep the newest 4)", inbox.prune("bob")).await?;
        show(&*inbox, "bob").await?;
        println!();
    }
    Ok(())
}
