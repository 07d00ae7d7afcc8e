//! The behaviour every [`InboxLifecycle`](mongo_social::inbox::InboxLifecycle) strategy must show, as plain async checks, and the
//! commands each operation costs ([`COSTS`], also the table of `docs/INBOXES.md`: [`cost_table`]).
//!
//! Each check takes a store (any strategy, behind `&DynInboxLifecycle<Note>`) in a fresh
//! database and panics with a description when the store misbehaves. `tests/inbox.rs` runs every
//! check against every strategy.

use mongo_social::error::{Forbidden, Invalid};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::inbox_suite::{read_all, Note};
use super::{CommandCounter, TestDb};
use mongo_social::inbox::{
    DynInboxLifecycle, DynInboxStore, Filter, Message, MessageId, NewMessage, Strategy, UpTo,
};
use mongo_social::test_support::inbox_cursor;
use mongo_social::{error::Entity, Error, PageRequest};

type Store = DynInboxLifecycle<Note>;

/// Collections a refused operation may touch: lock documents come and go.
const LOCKS: [&str; 1] = ["inbox_locks"];

fn plain(store: &Store) -> &DynInboxStore<Note> {
    store
}

/// Sends one note from `from` to `to`.
pub async fn send(store: &Store, from: &str, to: &[&str], seq: u32) -> Message<Note> {
    store
        .send(NewMessage::new(
            from,
            to.iter().copied(),
            Note::new(from, seq),
        ))
        .await
        .expect("send")
        .message
}

/// `owner`'s whole inbox, walked in pages of `page_size` (every page but the last full).
pub async fn walk(store: &Store, owner: &str, page_size: usize) -> Vec<Message<Note>> {
    read_all(plain(store), owner, page_size).await
}

fn ids(messages: &[Message<Note>]) -> Vec<MessageId> {
    messages.iter().map(|m| m.id).collect()
}

/// Checks that `owner`'s counts are what their pages show: `count` the messages, the unread
/// count those not read; and returns the inbox.
pub async fn assert_counts_match_pages(store: &Store, owner: &str) -> Vec<Message<Note>> {
    let inbox = walk(store, owner, 7).await;
    assert_eq!(
        store.count(owner).await.expect("count"),
        inbox.len() as u64,
        "{owner}: count is not what the pages hold"
    );
    let unread = inbox.iter().filter(|m| !m.read).count() as u64;
    assert_eq!(
        store.unread_count(owner).await.expect("unread count"),
        unread,
        "{owner}: the unread count is not the unread messages the pages hold"
    );
    inbox
}

fn is_message_not_found(result: &mongo_social::Result<impl std::fmt::Debug>) -> bool {
    matches!(
        result,
        Err(Error::NotFound {
            what: Entity::Message,
            ..
        })
    )
}

/// Read state: marks of one message, of a message and everything older, through a cursor and
/// everything; unread counts per owner; stars; all shown on pages.
pub async fn read_state(store: &Store) {
    let direct: Vec<Message<Note>> = {
        let mut sent = Vec::new();
        for seq in 0..5 {
            sent.push(send(store, "joe", &["bob"], seq).await);
        }
        sent
    };
    let group = send(store, "ann", &["bob", "cat"], 0).await;
    assert_eq!(store.unread_count("bob").await.unwrap(), 6);
    assert_eq!(store.unread_count("cat").await.unwrap(), 1);
    let inbox = assert_counts_match_pages(store, "bob").await;
    assert!(inbox.iter().all(|m| !m.read && !m.starred));

    store
        .mark_read("bob", direct[2].id)
        .await
        .expect("mark read");
    store
        .mark_read("bob", direct[2].id)
        .await
        .expect("mark read again");
    assert_eq!(store.unread_count("bob").await.unwrap(), 5);
    let inbox = assert_counts_match_pages(store, "bob").await;
    let read: Vec<MessageId> = inbox.iter().filter(|m| m.read).map(|m| m.id).collect();
    assert_eq!(read, [direct[2].id]);

    store
        .mark_unread("bob", direct[2].id)
        .await
        .expect("unread");
    store.mark_unread("bob", direct[2].id).await.expect("again");
    assert_eq!(store.unread_count("bob").await.unwrap(), 6);

    // One owner's mark of a group message is theirs alone.
    store.mark_read("bob", group.id).await.unwrap();
    assert_eq!(store.unread_count("bob").await.unwrap(), 5);
    assert_eq!(store.unread_count("cat").await.unwrap(), 1);
    assert!(!walk(store, "cat", 5).await[0].read);

    // A message and everything older.
    store
        .mark_read_up_to("bob", UpTo::Message(direct[2].id))
        .await
        .expect("up to a message");
    let inbox = assert_counts_match_pages(store, "bob").await;
    let unread: Vec<MessageId> = inbox.iter().filter(|m| !m.read).map(|m| m.id).collect();
    assert_eq!(unread, [direct[4].id, direct[3].id]);

    // Through a page's cursor: the page's last message and everything older.
    let first = store
        .inbox_page("bob", PageRequest::first(2))
        .await
        .unwrap();
    assert_eq!(ids(&first.items), [group.id, direct[4].id]);
    store
        .mark_read_up_to("bob", UpTo::Cursor(first.next.expect("more")))
        .await
        .expect("up to a cursor");
    assert_eq!(store.unread_count("bob").await.unwrap(), 0);
    assert_counts_match_pages(store, "bob").await;

    store.mark_unread("bob", direct[0].id).await.unwrap();
    store.mark_unread("bob", direct[3].id).await.unwrap();
    assert_eq!(store.unread_count("bob").await.unwrap(), 2);
    store
        .mark_read_up_to("bob", UpTo::Newest)
        .await
        .expect("everything");
    assert_eq!(store.unread_count("bob").await.unwrap(), 0);
    let later = send(store, "joe", &["bob"], 5).await;
    assert_eq!(
        store.unread_count("bob").await.unwrap(),
        1,
        "a message arriving after everything was marked read is unread"
    );
    assert!(!walk(store, "bob", 10).await[0].read);
    // Nothing left to mark: nothing changes, and nothing goes negative.
    store.mark_read("bob", later.id).await.unwrap();
    store
        .mark_read_up_to("bob", UpTo::Newest)
        .await
        .expect("everything, again");
    assert_eq!(store.unread_count("bob").await.unwrap(), 0);

    // Stars, per owner.
    store
        .set_starred("bob", group.id, true)
        .await
        .expect("star");
    store
        .set_starred("bob", group.id, true)
        .await
        .expect("star again");
    store.set_starred("bob", direct[1].id, true).await.unwrap();
    store.set_starred("bob", direct[1].id, false).await.unwrap();
    let inbox = assert_counts_match_pages(store, "bob").await;
    let starred: Vec<MessageId> = inbox.iter().filter(|m| m.starred).map(|m| m.id).collect();
    assert_eq!(starred, [group.id]);
    assert!(!walk(store, "cat", 5).await[0].starred);
    assert_eq!(
        store.count("bob").await.unwrap(),
        7,
        "marks change no count"
    );
    assert_counts_match_pages(store, "cat").await;
}

/// Delete for me: the owner's inbox loses the message, every other recipient keeps it; pages
/// stay exact and counts follow.
pub async fn delete_for_me(store: &Store) {
    let mut group = Vec::new();
    for seq in 0..3 {
        group.push(send(store, "joe", &["bob", "cat"], seq).await);
    }
    let mut direct = Vec::new();
    for seq in 3..5 {
        direct.push(send(store, "joe", &["bob"], seq).await);
    }
    store.delete("bob", group[1].id).await.expect("delete");
    store
        .delete("bob", group[1].id)
        .await
        .expect("delete again");
    let bob = assert_counts_match_pages(store, "bob").await;
    assert_eq!(
        ids(&bob),
        [direct[1].id, direct[0].id, group[2].id, group[0].id]
    );
    let cat = assert_counts_match_pages(store, "cat").await;
    assert_eq!(ids(&cat), [group[2].id, group[1].id, group[0].id]);

    store.mark_read("bob", group[0].id).await.unwrap();
    store.delete("bob", group[0].id).await.unwrap();
    let bob = assert_counts_match_pages(store, "bob").await;
    assert_eq!(bob.len(), 3);
    assert_eq!(store.unread_count("bob").await.unwrap(), 3);
    for page_size in [1, 2, 3] {
        assert_eq!(
            ids(&walk(store, "bob", page_size).await),
            ids(&bob),
            "pages of {page_size} after deletes"
        );
    }
    assert!(is_message_not_found(
        &store.mark_read("bob", group[1].id).await
    ));
    assert!(is_message_not_found(
        &store.set_starred("bob", group[1].id, true).await
    ));
    assert!(is_message_not_found(
        &store.delete("bob", MessageId::new()).await
    ));
    assert!(
        is_message_not_found(&store.delete("dan", group[2].id).await),
        "a message dan never received"
    );
    assert_counts_match_pages(store, "cat").await;
}

/// Retract and edit by the sender: every recipient's inbox (a group message, and a delivered
/// copy, included) loses or shows the change; nobody else may; repeats change nothing more.
pub async fn retract_and_edit(store: &Store) {
    let group = send(store, "joe", &["bob", "cat", "dan"], 0).await;
    let other = send(store, "joe", &["bob"], 1).await;
    let theirs = send(store, "ann", &["bob"], 0).await;
    store
        .deliver(&group, &["eve".to_owned()])
        .await
        .expect("deliver");
    store.mark_read("bob", group.id).await.unwrap();

    let mut edited_note = Note::new("joe", 0);
    edited_note.text = "edited".to_owned();
    let edited = store
        .edit("joe", group.id, edited_note.clone())
        .await
        .expect("edit");
    for owner in ["bob", "cat", "dan", "eve"] {
        let inbox = assert_counts_match_pages(store, owner).await;
        let message = inbox
            .iter()
            .find(|m| m.id == group.id)
            .unwrap_or_else(|| panic!("{owner} lost the edited message"));
        assert_eq!(message.payload, edited_note, "{owner}");
        assert_eq!(message.edited, Some(edited), "{owner}");
        assert_eq!(message.from, "joe");
    }
    let bob = walk(store, "bob", 10).await;
    assert_eq!(
        ids(&bob),
        [theirs.id, other.id, group.id],
        "order unchanged"
    );
    assert!(bob[2].read, "an edit keeps the read state");
    assert_eq!(bob[1].edited, None);

    let refused = store.edit("ann", group.id, Note::new("ann", 9)).await;
    assert!(
        matches!(
            refused,
            Err(Error::Forbidden {
                reason: Forbidden::NotSender { .. },
                ..
            })
        ),
        "{refused:?}"
    );
    let refused = store.retract("ann", group.id).await;
    assert!(
        matches!(
            refused,
            Err(Error::Forbidden {
                reason: Forbidden::NotSender { .. },
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(is_message_not_found(
        &store.retract("joe", MessageId::new()).await
    ));
    assert!(is_message_not_found(
        &store
            .edit("joe", MessageId::new(), Note::new("joe", 0))
            .await
    ));
    assert_eq!(walk(store, "cat", 5).await[0].payload, edited_note);

    store.retract("joe", group.id).await.expect("retract");
    store.retract("joe", group.id).await.expect("retract again");
    let bob = assert_counts_match_pages(store, "bob").await;
    assert_eq!(ids(&bob), [theirs.id, other.id]);
    for owner in ["cat", "dan", "eve"] {
        assert!(
            assert_counts_match_pages(store, owner).await.is_empty(),
            "{owner} still holds the retracted message"
        );
    }
    assert!(is_message_not_found(
        &store.edit("joe", group.id, Note::new("joe", 0)).await
    ));
    assert!(is_message_not_found(
        &store.mark_read("cat", group.id).await
    ));
    store
        .delete("cat", group.id)
        .await
        .expect("deleting a retracted message changes nothing");
    assert!(assert_counts_match_pages(store, "cat").await.is_empty());
    assert_eq!(store.unread_count("bob").await.unwrap(), 2);
}

/// Mute and block: hidden from pages and counts (read state kept), delivered hidden or not
/// delivered, shown again when lifted; `send` reports the blocked recipients.
pub async fn mute_and_block(store: &Store) {
    let j0 = send(store, "joe", &["bob"], 0).await;
    let j1 = send(store, "joe", &["bob"], 1).await;
    let a0 = send(store, "ann", &["bob"], 0).await;
    store.mute("bob", "joe").await.expect("mute");
    store.mute("bob", "joe").await.expect("mute again");
    let bob = assert_counts_match_pages(store, "bob").await;
    assert_eq!(ids(&bob), [a0.id]);
    assert_eq!(store.filters("bob").await.unwrap().muted, ["joe"]);

    let j2 = store
        .send(NewMessage::new("joe", ["bob", "cat"], Note::new("joe", 2)))
        .await
        .expect("send to a muting recipient");
    assert!(j2.skipped.is_empty(), "muting is not blocking");
    let j2 = j2.message;
    assert_eq!(ids(&assert_counts_match_pages(store, "bob").await), [a0.id]);
    assert_eq!(ids(&assert_counts_match_pages(store, "cat").await), [j2.id]);

    // Hidden messages keep their own state: marked one by one, not by marking everything.
    store
        .mark_read("bob", j0.id)
        .await
        .expect("a muted message");
    store.mark_read_up_to("bob", UpTo::Newest).await.unwrap();
    assert_eq!(store.unread_count("bob").await.unwrap(), 0);
    store.unmute("bob", "joe").await.expect("unmute");
    store.unmute("bob", "joe").await.expect("unmute again");
    let bob = assert_counts_match_pages(store, "bob").await;
    assert_eq!(ids(&bob), [j2.id, a0.id, j1.id, j0.id]);
    let read: Vec<bool> = bob.iter().map(|m| m.read).collect();
    assert_eq!(read, [false, true, false, true]);
    assert!(store.filters("bob").await.unwrap().muted.is_empty());

    store.block("bob", "ann").await.expect("block");
    assert_eq!(
        ids(&assert_counts_match_pages(store, "bob").await),
        [j2.id, j1.id, j0.id]
    );
    let a1 = store
        .send(NewMessage::new("ann", ["bob", "cat"], Note::new("ann", 1)))
        .await
        .expect("send to a blocking recipient");
    assert_eq!(a1.skipped, ["bob"]);
    assert_eq!(
        ids(&assert_counts_match_pages(store, "cat").await),
        [a1.message.id, j2.id]
    );
    let only_bob = store
        .send(NewMessage::new("ann", ["bob"], Note::new("ann", 2)))
        .await
        .expect("send to blocking recipients only");
    assert_eq!(only_bob.skipped, ["bob"]);
    assert!(is_message_not_found(
        &store.retract("ann", only_bob.message.id).await
    ));
    let skipped = store
        .deliver(&a0, &["bob".to_owned(), "dan".to_owned()])
        .await
        .expect("deliver");
    assert_eq!(skipped, ["bob"], "deliver skips the blocking recipient too");
    assert_eq!(ids(&walk(store, "dan", 5).await), [a0.id]);

    // Blocked and muted: lifting one filter leaves the messages hidden.
    store.mute("bob", "ann").await.unwrap();
    store.unblock("bob", "ann").await.expect("unblock");
    assert_eq!(assert_counts_match_pages(store, "bob").await.len(), 3);
    store.unmute("bob", "ann").await.unwrap();
    let bob = assert_counts_match_pages(store, "bob").await;
    assert_eq!(
        ids(&bob),
        [j2.id, a0.id, j1.id, j0.id],
        "what was sent while blocked was never delivered"
    );
    let filters = store.filters("bob").await.unwrap();
    assert!(filters.muted.is_empty() && filters.blocked.is_empty());
    store
        .set_filter("bob", "zed", Filter::Block, true)
        .await
        .expect("block someone who never wrote");
    assert_eq!(store.filters("bob").await.unwrap().blocked, ["zed"]);
    assert_counts_match_pages(store, "cat").await;
}

/// Retention. `keep` keeps each owner's newest 60 messages; `aged` (in the same database, other
/// collections) keeps a day. Checks what goes, what stays, and that cursors, marks and counts
/// of pruned history behave as documented; and the commands a prune costs.
pub async fn retention(keep: &Store, aged: &Store, commands: &CommandCounter) {
    let info = super::server_info().await;
    let strategy = keep.strategy();
    let bucket = (strategy == Strategy::BucketedFanOut).then_some(50_u64);
    let mut sent = Vec::new();
    for seq in 0..130 {
        sent.push(send(keep, "joe", &["bob"], seq).await);
    }
    keep.mark_read("bob", sent[0].id).await.unwrap();
    keep.mark_read("bob", sent[100].id).await.unwrap();
    // A cursor deep in what will be pruned: after the 120th newest message.
    let deep = keep
        .inbox_page("bob", PageRequest::first(120))
        .await
        .unwrap()
        .next
        .expect("more");
    commands.reset();
    let pruned = keep.prune("bob").await.expect("prune");
    let cost = commands.names();
    let kept = 130 - pruned;
    match bucket {
        // Whole buckets: bucket 0 holds positions 0..50, all past the newest 60 of 130.
        Some(size) => {
            assert_eq!(pruned, size, "{cost:?}");
            assert!(kept >= 60 && kept < 60 + size);
        }
        None => assert_eq!(pruned, 70),
    }
    assert_eq!(
        cost.len(),
        expected_commands("prune", strategy, &info.capabilities()),
        "prune cost {cost:?}"
    );
    let mut newest: Vec<MessageId> = sent.iter().rev().map(|m| m.id).collect();
    newest.truncate(kept as usize);
    let bob = assert_counts_match_pages(keep, "bob").await;
    assert_eq!(ids(&bob), newest, "the newest {kept} stay, in order");
    assert_eq!(
        bob.iter()
            .filter(|m| m.read)
            .map(|m| m.id)
            .collect::<Vec<_>>(),
        [sent[100].id],
        "read state of what stays is kept"
    );
    let past = keep
        .inbox_page("bob", PageRequest::after(10, deep))
        .await
        .expect("a cursor into pruned history");
    assert!(past.items.is_empty() && past.next.is_none(), "{past:?}");
    assert!(is_message_not_found(
        &keep.mark_read("bob", sent[0].id).await
    ));
    assert!(is_message_not_found(
        &keep.mark_read_up_to("bob", UpTo::Message(sent[1].id)).await
    ));
    assert_eq!(keep.prune("bob").await.unwrap(), 0, "nothing more to prune");
    keep.mark_read_up_to("bob", UpTo::Newest).await.unwrap();
    assert_eq!(keep.unread_count("bob").await.unwrap(), 0);
    assert_eq!(keep.prune("nobody").await.unwrap(), 0);

    // By age: 60 messages ten days old, then 10 new ones.
    let old = bson::DateTime::now().timestamp_millis() - 10 * 24 * 3600 * 1000;
    let mut before = Vec::new();
    for seq in 0..60 {
        let message = Message {
            id: MessageId::new(),
            from: "joe".to_owned(),
            to: Vec::new(),
            sent: bson::DateTime::from_millis(old + seq),
            payload: Note::new("joe", seq as u32),
            edited: None,
            read: false,
            starred: false,
        };
        aged.deliver(&message, &["bob".to_owned()])
            .await
            .expect("deliver");
        before.push(message);
    }
    for seq in 60..70 {
        send(aged, "joe", &["bob"], seq).await;
    }
    let pruned = aged.prune("bob").await.expect("prune by age");
    // Buckets: bucket 0 is all old; bucket 1 holds old and new, so it stays whole.
    assert_eq!(pruned, bucket.unwrap_or(60));
    let bob = assert_counts_match_pages(aged, "bob").await;
    assert_eq!(bob.len() as u64, 70 - pruned);
    assert_eq!(aged.prune("bob").await.unwrap(), 0);
}

/// Bad input: a typed error, and nothing written (every document of the database, but lock
/// documents, is the same before and after).
pub async fn bad_input(store: &Store, db: &TestDb) {
    let to_bob = send(store, "joe", &["bob"], 0).await;
    let to_ann = send(store, "joe", &["ann"], 1).await;
    send(store, "joe", &["bob"], 2).await;
    send(store, "ann", &["bob"], 0).await;
    let bobs = store
        .inbox_page("bob", PageRequest::first(1))
        .await
        .unwrap()
        .next
        .expect("bob has more");
    let anns = {
        send(store, "joe", &["ann"], 3).await;
        store
            .inbox_page("ann", PageRequest::first(1))
            .await
            .unwrap()
            .next
            .expect("ann has more")
    };
    let before = db.snapshot(&LOCKS).await;
    let unknown = MessageId::new();
    let huge = Note {
        sender: "joe".into(),
        seq: 0,
        text: "x".repeat(17 * 1024 * 1024),
    };
    let blank = |result: mongo_social::Result<()>, what: &str| {
        assert!(
            matches!(result, Err(Error::InvalidInput { reason: Invalid::Blank { what: w }, .. }) if w == what),
            "{what}: {result:?}"
        );
    };
    blank(store.mark_read(" ", to_bob.id).await, "owner");
    blank(store.mark_unread("", to_bob.id).await, "owner");
    blank(store.set_starred("\t", to_bob.id, true).await, "owner");
    blank(store.mark_read_up_to("", UpTo::Newest).await, "owner");
    blank(store.delete("", to_bob.id).await, "owner");
    blank(store.retract(" ", to_bob.id).await, "sender");
    blank(
        store
            .edit("", to_bob.id, Note::new("joe", 0))
            .await
            .map(drop),
        "sender",
    );
    blank(store.mute("", "joe").await, "owner");
    blank(store.block("bob", " ").await, "sender");
    blank(store.filters("").await.map(drop), "owner");
    blank(store.unread_count("").await.map(drop), "owner");
    blank(store.prune("").await.map(drop), "owner");

    for (what, result) in [
        ("unknown id", store.mark_read("bob", unknown).await),
        ("unknown id", store.mark_unread("bob", unknown).await),
        ("unknown id", store.set_starred("bob", unknown, true).await),
        ("unknown id", store.delete("bob", unknown).await),
        ("unknown id", store.retract("joe", unknown).await),
        (
            "unknown id",
            store.mark_read_up_to("bob", UpTo::Message(unknown)).await,
        ),
        ("never received", store.mark_read("bob", to_ann.id).await),
        ("never received", store.delete("bob", to_ann.id).await),
        (
            "never received",
            store.mark_read_up_to("bob", UpTo::Message(to_ann.id)).await,
        ),
    ] {
        assert!(is_message_not_found(&result), "{what}: {result:?}");
    }
    let edit = store.edit("joe", unknown, Note::new("joe", 0)).await;
    assert!(is_message_not_found(&edit), "{edit:?}");
    for result in [
        store.retract("bob", to_bob.id).await,
        store
            .edit("ann", to_bob.id, Note::new("ann", 0))
            .await
            .map(drop),
    ] {
        assert!(
            matches!(&result, Err(Error::Forbidden { reason: Forbidden::NotSender { user, .. }, .. }) if user != "joe"),
            "{result:?}"
        );
    }
    let too_large = store.edit("joe", to_bob.id, huge).await;
    assert!(
        matches!(
            too_large,
            Err(Error::InvalidInput {
                reason: Invalid::TooLarge { .. },
                ..
            })
        ),
        "{too_large:?}"
    );
    // Cursors: another owner's, another strategy's, and one that is not a position.
    let foreign = match store.strategy() {
        Strategy::BucketedFanOut => {
            inbox_cursor("iw", "bob", &["1700000000000", &unknown.0.to_hex()])
        }
        _ => inbox_cursor("ib", "bob", &["17"]),
    };
    for cursor in [anns.clone(), foreign, inbox_cursor("ib", "bob", &["x"])] {
        let marked = store
            .mark_read_up_to("bob", UpTo::Cursor(cursor.clone()))
            .await;
        assert!(
            matches!(
                marked,
                Err(Error::InvalidInput {
                    reason: Invalid::Cursor { .. },
                    ..
                })
            ),
            "{cursor}: {marked:?}"
        );
        let page = store
            .inbox_page("bob", PageRequest::after(5, cursor.clone()))
            .await;
        assert!(
            matches!(
                page,
                Err(Error::InvalidInput {
                    reason: Invalid::Cursor { .. },
                    ..
                })
            ),
            "page after {cursor}: {page:?}"
        );
    }
    assert_eq!(
        db.snapshot(&LOCKS).await,
        before,
        "a refused operation wrote something"
    );
    // Their own cursors still work.
    store
        .mark_read_up_to("bob", UpTo::Cursor(bobs))
        .await
        .expect("bob's own cursor");
    store
        .inbox_page("ann", PageRequest::after(5, anns))
        .await
        .expect("ann's own cursor");
}

/// What one lifecycle operation costs, in commands, per strategy.
#[derive(Clone, Copy, Debug)]
pub struct Cost {
    /// The operation, as the table of `docs/INBOXES.md` names it.
    pub operation: &'static str,
    /// Commands where single-document updates are atomic (MongoDB, mongo-java-server): fan-out
    /// on read, fan-out on write, buckets.
    pub commands: [usize; 3],
    /// Commands added where they are not (FerretDB 1.x): the lock's `insert` and `delete`, and
    /// for a message's changes in every inbox, the `find` of its owners first.
    pub locked_extra: [usize; 3],
    /// Commands added where a write command is one transaction (DocumentDB): a change of every
    /// recipient's state on shared documents first finds them (the `+1`), then updates them in
    /// `_id` order 16 to a command, so one `update` more per 16 documents past the first 16
    /// ([`checked_commands`] counts those from what was sent).
    pub transaction_extra: [usize; 3],
}

/// The commands of each lifecycle operation when nothing races it: what [`command_counts`]
/// and [`retention`] assert, and what the table of `docs/INBOXES.md` ([`cost_table`]) shows.
pub const COSTS: &[Cost] = &[
    Cost {
        operation: "send (the recipients' mute and block lists read)",
        // Buckets: the message's record (where each entry goes, for retract and edit) is one
        // `update` more, in place of an index on every entry's id that every push would pay.
        commands: [2, 2, 3],
        // Where updates are not atomic: the recipients' lock taken and given back, and their
        // target buckets read before the pushes by `_id`.
        locked_extra: [0, 0, 3],
        transaction_extra: [0, 0, 0],
    },
    Cost {
        operation: "inbox page (hidden messages filtered)",
        commands: [1, 1, 1],
        locked_extra: [0, 0, 0],
        transaction_extra: [0, 0, 0],
    },
    Cost {
        operation: "mark one read / unread, star / unstar",
        commands: [1, 1, 2],
        locked_extra: [2, 2, 2],
        transaction_extra: [0, 0, 0],
    },
    Cost {
        operation: "mark read up to a message",
        commands: [2, 2, 3],
        locked_extra: [3, 2, 2],
        transaction_extra: [1, 0, 0],
    },
    Cost {
        operation: "mark read up to a cursor, or everything",
        commands: [1, 1, 2],
        locked_extra: [3, 2, 2],
        transaction_extra: [1, 0, 0],
    },
    Cost {
        operation: "unread count",
        // Buckets: the full buckets still counting unread messages and the newest bucket, in
        // two `find`s sent at once (one round trip).
        commands: [1, 1, 2],
        locked_extra: [0, 0, 0],
        transaction_extra: [0, 0, 0],
    },
    Cost {
        operation: "count",
        commands: [1, 1, 1],
        locked_extra: [0, 0, 0],
        transaction_extra: [0, 0, 0],
    },
    Cost {
        operation: "delete for me",
        commands: [1, 1, 2],
        locked_extra: [2, 2, 2],
        transaction_extra: [0, 0, 0],
    },
    Cost {
        operation: "retract (every recipient)",
        // Buckets: the message's record read first (where its entries went), in place of an
        // index on every entry's id that every push would pay.
        commands: [1, 1, 3],
        locked_extra: [3, 3, 2],
        transaction_extra: [1, 1, 0],
    },
    Cost {
        operation: "edit (every recipient)",
        commands: [2, 2, 3],
        locked_extra: [3, 3, 2],
        transaction_extra: [1, 1, 0],
    },
    Cost {
        operation: "mute, unmute, block, unblock",
        commands: [2, 2, 3],
        locked_extra: [5, 2, 2],
        transaction_extra: [1, 0, 0],
    },
    Cost {
        operation: "filters (the mute and block lists)",
        commands: [1, 1, 1],
        locked_extra: [0, 0, 0],
        transaction_extra: [0, 0, 0],
    },
    Cost {
        operation: "prune",
        commands: [3, 2, 2],
        locked_extra: [0, 0, 0],
        // Where a command is a transaction, the shared messages' `find` stands in for the
        // `update_many` when none is shared, as here.
        transaction_extra: [0, 0, 0],
    },
];

fn column(strategy: Strategy) -> usize {
    match strategy {
        Strategy::FanOutOnRead => 0,
        Strategy::FanOutOnWrite => 1,
        _ => 2,
    }
}

/// The commands [`COSTS`] gives `operation` for `strategy`, with locks or without.
///
/// # Panics
///
/// For an operation [`COSTS`] does not name.
pub fn expected_commands(
    operation: &str,
    strategy: Strategy,
    capabilities: &mongo_social::server::Capabilities,
) -> usize {
    let cost = COSTS
        .iter()
        .find(|cost| cost.operation.starts_with(operation))
        .unwrap_or_else(|| panic!("no cost for {operation}"));
    let i = column(strategy);
    let locked = if capabilities.atomic_updates {
        0
    } else {
        cost.locked_extra[i]
    };
    let transactions = if capabilities.write_commands_are_transactions {
        cost.transaction_extra[i]
    } else {
        0
    };
    cost.commands[i] + locked + transactions
}

/// [`expected_commands`] for an operation that sent `names`: where a write command is one
/// transaction and the operation changes shared documents 16 to a command, each `update` after
/// the `find` of those documents, past the first, is 16 documents more, counted from `names`
/// (every other command must match).
pub fn checked_commands(
    operation: &str,
    strategy: Strategy,
    capabilities: &mongo_social::server::Capabilities,
    names: &[String],
) -> usize {
    let expected = expected_commands(operation, strategy, capabilities);
    let cost = COSTS
        .iter()
        .find(|cost| cost.operation.starts_with(operation))
        .unwrap_or_else(|| panic!("no cost for {operation}"));
    if !capabilities.write_commands_are_transactions
        || cost.transaction_extra[column(strategy)] == 0
    {
        return expected;
    }
    // The `update`s after the `find` of the shared documents are its chunks.
    let last_find = names.iter().rposition(|name| name == "find").unwrap_or(0);
    let chunks = names[last_find..]
        .iter()
        .filter(|name| *name == "update")
        .count();
    expected + chunks.saturating_sub(1)
}

/// [`COSTS`] as `docs/INBOXES.md` shows it: a Markdown table, the extra commands where updates are not
/// atomic in parentheses, and where a command is one transaction in brackets.
pub fn cost_table() -> String {
    let mut table = String::from(
        "| operation | fan-out on read | fan-out on write | buckets |\n|---|---|---|---|\n",
    );
    for cost in COSTS {
        table.push_str(&format!("| {} |", cost.operation));
        for i in 0..3 {
            let locked = match cost.locked_extra[i] {
                0 => String::new(),
                n => format!(" (+{n})"),
            };
            let transactions = match cost.transaction_extra[i] {
                0 => String::new(),
                n => format!(" [+{n}]"),
            };
            table.push_str(&format!(" {}{locked}{transactions} |", cost.commands[i]));
        }
        table.push('\n');
    }
    table
}

/// Measures every operation of [`COSTS`] but prune (see [`retention`]) and checks its count on
/// this server.
pub async fn command_counts(store: &Store, commands: &CommandCounter) {
    let capabilities = super::server_info().await.capabilities();
    let strategy = store.strategy();
    let mut sent = Vec::new();
    for seq in 0..60 {
        sent.push(send(store, "joe", &["bob"], seq).await);
    }
    send(store, "ann", &["bob"], 0).await;
    let group = send(store, "joe", &["bob", "cat", "dan"], 60).await;
    // Detection and first-use costs are not part of what is measured.
    store.count("bob").await.unwrap();
    store.unread_count("bob").await.unwrap();

    macro_rules! check {
        ($operation:expr, $call:expr) => {{
            let (result, names) = commands.measure($call).await;
            result.expect($operation);
            assert_eq!(
                names.len(),
                checked_commands($operation, strategy, &capabilities, &names),
                "{}: {names:?}",
                $operation
            );
        }};
    }
    check!(
        "send",
        store.send(NewMessage::new("joe", ["bob"], Note::new("joe", 61)))
    );
    check!(
        "inbox page",
        store.inbox_page("bob", PageRequest::first(10))
    );
    check!("mark one read", store.mark_read("bob", sent[5].id));
    check!("mark one read", store.mark_unread("bob", sent[5].id));
    check!("mark one read", store.set_starred("bob", sent[6].id, true));
    check!(
        "mark read up to a message",
        store.mark_read_up_to("bob", UpTo::Message(sent[10].id))
    );
    let next = store
        .inbox_page("bob", PageRequest::first(5))
        .await
        .unwrap()
        .next
        .expect("more");
    check!(
        "mark read up to a cursor",
        store.mark_read_up_to("bob", UpTo::Cursor(next))
    );
    send(store, "joe", &["bob"], 62).await;
    check!(
        "mark read up to a cursor",
        store.mark_read_up_to("bob", UpTo::Newest)
    );
    check!("unread count", store.unread_count("bob"));
    check!("count", store.count("bob"));
    check!("delete for me", store.delete("bob", sent[20].id));
    check!("edit", store.edit("joe", group.id, Note::new("joe", 99)));
    check!("retract", store.retract("joe", group.id));
    check!("mute", store.mute("bob", "ann"));
    check!("mute", store.unmute("bob", "ann"));
    check!("filters", store.filters("bob"));
}

/// Sixteen concurrent senders (some retracting what they sent) while every owner pages, marks
/// read and unread, stars, marks through cursors, deletes, and mutes and unmutes a quiet
/// sender. Afterwards each inbox holds exactly the messages sent to its owner and neither
/// retracted nor deleted by them, once each, with no gap across pages; its count is what its
/// pages hold, and its unread count the unread messages they hold.
pub async fn concurrent_lifecycle(store: Arc<Store>, per_sender: u32) {
    const OWNERS: [&str; 4] = ["p0", "p1", "p2", "p3"];
    const SENDERS: u32 = 16;
    // A quiet sender's messages, there before, muted and unmuted throughout.
    for seq in 0..3 {
        send(&*store, "quiet", &OWNERS, seq).await;
    }
    let retracted: Arc<Mutex<HashSet<MessageId>>> = Arc::default();
    let deleted: Arc<Mutex<HashSet<(String, MessageId)>>> = Arc::default();
    let sending = Arc::new(AtomicBool::new(true));
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let store = Arc::clone(&store);
        let retracted = Arc::clone(&retracted);
        senders.push(tokio::spawn(async move {
            let from = format!("s{s}");
            let mut sent: Vec<Message<Note>> = Vec::new();
            for seq in 0..per_sender {
                let i = (s + seq) as usize;
                let mut to = vec![OWNERS[i % 4], OWNERS[(i + 1) % 4]];
                if seq % 3 == 0 {
                    to.push(OWNERS[(i + 2) % 4]);
                }
                let message = send(&*store, &from, &to, seq).await;
                if seq % 4 == 3 {
                    // Retract an earlier message, while others mark and delete it.
                    let earlier = sent[sent.len() - 2].id;
                    store.retract(&from, earlier).await.expect("retract");
                    retracted.lock().unwrap().insert(earlier);
                }
                sent.push(message);
            }
            sent
        }));
    }
    let mut owners = Vec::new();
    for owner in OWNERS {
        let store = Arc::clone(&store);
        let deleted = Arc::clone(&deleted);
        let sending = Arc::clone(&sending);
        owners.push(tokio::spawn(async move {
            let mut round = 0_usize;
            // One more round after the senders finish.
            let mut last = false;
            loop {
                if !sending.load(Ordering::Relaxed) {
                    last = true;
                }
                let page = store
                    .inbox_page(owner, PageRequest::first(8))
                    .await
                    .expect("page");
                for (i, message) in page.items.iter().enumerate() {
                    let result = match (round + i) % 5 {
                        0 | 3 => store.mark_read(owner, message.id).await,
                        1 => store.set_starred(owner, message.id, true).await,
                        2 => store.mark_unread(owner, message.id).await,
                        _ if round.is_multiple_of(3) => {
                            let done = store.delete(owner, message.id).await;
                            if done.is_ok() {
                                deleted
                                    .lock()
                                    .unwrap()
                                    .insert((owner.to_owned(), message.id));
                            }
                            done
                        }
                        _ => Ok(()),
                    };
                    // A message its sender retracted since the page was read is gone.
                    assert!(
                        result.is_ok() || is_message_not_found(&result),
                        "{owner}: {result:?}"
                    );
                }
                if let (Some(next), true) = (page.next, round % 4 == 1) {
                    store
                        .mark_read_up_to(owner, UpTo::Cursor(next))
                        .await
                        .expect("mark up to a cursor");
                }
                if round % 4 == 2 {
                    store.mute(owner, "quiet").await.expect("mute");
                    store.unmute(owner, "quiet").await.expect("unmute");
                }
                round += 1;
                if last {
                    return;
                }
            }
        }));
    }
    let mut sent = Vec::new();
    for task in senders {
        sent.extend(task.await.expect("sender"));
    }
    sending.store(false, Ordering::Relaxed);
    for task in owners {
        task.await.expect("owner");
    }
    let retracted = retracted.lock().unwrap().clone();
    let deleted = deleted.lock().unwrap().clone();
    let quiet = walk(&*store, "p0", 50).await;
    assert!(
        quiet.iter().any(|m| m.from == "quiet"),
        "unmuted at the end"
    );
    let mut per_owner: HashMap<&str, usize> = HashMap::new();
    for owner in OWNERS {
        let expected: HashSet<MessageId> = sent
            .iter()
            .filter(|m| m.to.iter().any(|to| to == owner))
            .map(|m| m.id)
            .filter(|id| !retracted.contains(id) && !deleted.contains(&(owner.to_owned(), *id)))
            .collect();
        for page_size in [7, 50] {
            let inbox: Vec<Message<Note>> = walk(&*store, owner, page_size)
                .await
                .into_iter()
                .filter(|m| m.from != "quiet")
                .collect();
            let found: HashSet<MessageId> = inbox.iter().map(|m| m.id).collect();
            assert_eq!(found.len(), inbox.len(), "{owner}: a message twice");
            assert_eq!(found, expected, "{owner}, pages of {page_size}");
        }
        let inbox = assert_counts_match_pages(&*store, owner).await;
        per_owner.insert(owner, inbox.len());
    }
    super::note(&format!(
        "concurrent_lifecycle ({}): {} sends, {} retracted, {} deleted; inboxes {per_owner:?}",
        store.strategy(),
        sent.len(),
        retracted.len(),
        deleted.len()
    ));
}

/// Owners mark, star, delete, mark everything read and mute through
/// [`FaultProxy::outage_during`](super::fault_proxy::FaultProxy::outage_during) (replies lost,
/// then every connection cut for 3 seconds), while a sender retracts; half of them through
/// `impatient` (the same collections, a client giving up within the outage). `store` and
/// `impatient` must reach the server through `proxy`.
///
/// Afterwards, with the sender unmuted: every count is what the pages hold (a lost reply
/// applied twice would have moved a bucket's counter twice); a delete or retraction that
/// returned `Ok` is gone; a message no call removed is there; and some impatient call failed,
/// so the error branch was checked.
pub async fn survives_outage(
    store: Arc<Store>,
    impatient: Arc<Store>,
    proxy: &super::fault_proxy::FaultProxy,
) {
    const OWNERS: [&str; 3] = ["o0", "o1", "o2"];
    let mut sent = Vec::new();
    for s in 0..3 {
        for seq in 0..8 {
            sent.push(send(&*store, &format!("s{s}"), &OWNERS, seq).await);
        }
    }
    let sent = Arc::new(sent);
    let mut tasks = Vec::new();
    for (k, owner) in OWNERS.into_iter().enumerate() {
        let store = if k % 2 == 0 { &store } else { &impatient }.clone();
        let sent = Arc::clone(&sent);
        tasks.push(tokio::spawn(async move {
            // (message, removed for sure, maybe removed) and whether a call failed.
            let mut removed = Vec::new();
            let mut failed = 0;
            for round in 0..60_usize {
                let message = &sent[(round * 7 + k) % sent.len()];
                let result = match round % 6 {
                    0 => store.mark_read(owner, message.id).await,
                    1 => store.set_starred(owner, message.id, round % 4 == 1).await,
                    2 => store.mark_unread(owner, message.id).await,
                    3 if round % 12 == 3 => {
                        let done = store.delete(owner, message.id).await;
                        removed.push((message.id, done.is_ok()));
                        done
                    }
                    4 => store.mark_read_up_to(owner, UpTo::Newest).await,
                    5 if round % 12 == 5 => store.mute(owner, "s2").await,
                    5 => store.unmute(owner, "s2").await,
                    _ => Ok(()),
                };
                if let Err(error) = &result {
                    assert!(
                        error.is_retryable() || error.is_not_found(),
                        "{owner}: {error}"
                    );
                    failed += 1;
                }
                tokio::time::sleep(std::time::Duration::from_millis(40)).await;
            }
            (owner, removed, failed)
        }));
    }
    {
        let store = impatient.clone();
        let sent = Arc::clone(&sent);
        tasks.push(tokio::spawn(async move {
            let mut removed = Vec::new();
            let mut failed = 0;
            for message in sent.iter().filter(|m| m.from == "s0").step_by(2) {
                let done = store.retract("s0", message.id).await;
                if let Err(error) = &done {
                    assert!(error.is_retryable(), "retract: {error}");
                    failed += 1;
                }
                removed.push((message.id, done.is_ok()));
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            ("retractions", removed, failed)
        }));
    }
    let outcomes = proxy.outage_during(tasks).await;
    let failed: usize = outcomes.iter().map(|o| o.2).sum();
    let mut surely: HashSet<(&str, MessageId)> = HashSet::new();
    let mut maybe: HashSet<(&str, MessageId)> = HashSet::new();
    for (who, removed, _) in &outcomes {
        for (id, ok) in removed {
            let owners: Vec<&str> = if *who == "retractions" {
                OWNERS.to_vec()
            } else {
                vec![*who]
            };
            for owner in owners {
                if *ok {
                    surely.insert((owner, *id));
                } else {
                    maybe.insert((owner, *id));
                }
            }
        }
    }
    for owner in OWNERS {
        store
            .unmute(owner, "s2")
            .await
            .expect("unmute after the outage");
        let inbox = assert_counts_match_pages(&*store, owner).await;
        let held: HashSet<MessageId> = inbox.iter().map(|m| m.id).collect();
        assert_eq!(held.len(), inbox.len(), "{owner}: a message twice");
        for message in sent.iter() {
            let key = (owner, message.id);
            if surely.contains(&key) {
                assert!(!held.contains(&message.id), "{owner}: removed, still there");
            } else if !maybe.contains(&key) {
                assert!(held.contains(&message.id), "{owner}: lost {}", message.id);
            }
        }
    }
    super::note(&format!(
        "lifecycle survives_outage ({}): {failed} calls failed; proxy lost {} replies",
        store.strategy(),
        proxy.replies_lost()
    ));
    assert!(
        failed > 0
            || proxy
                .fails_during_outage(std::time::Duration::from_secs(2), impatient.count("bob"))
                .await,
        "an impatient call gave up during the outage"
    );
}

/// The messages each concurrent sender sends in [`concurrent_lifecycle`] on this server: fewer
/// where the bucketed strategy serializes delivery per recipient (no atomic updates), as
/// [`super::inbox_suite::Volume::for_server`] does.
pub fn concurrent_volume(info: &mongo_social::server::ServerInfo, strategy: Strategy) -> u32 {
    if super::inbox_suite::Volume::for_server(info, strategy) == super::inbox_suite::Volume::FULL {
        12
    } else {
        6
    }
}

/// The store is usable through the plain store trait, and its lifecycle reads back through
/// `Arc<DynInboxLifecycle>` upcast to `Arc<DynInboxStore>`.
pub async fn upcasts(store: Arc<Store>) {
    let message = send(&*store, "joe", &["bob"], 0).await;
    store.mark_read("bob", message.id).await.unwrap();
    let plain: Arc<DynInboxStore<Note>> = store;
    let page = plain
        .inbox_page("bob", PageRequest::first(5))
        .await
        .unwrap();
    assert!(page.items[0].read);
}
