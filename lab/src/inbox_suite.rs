//! The behaviour every [`mongo_social::InboxStore`] strategy must show, as plain async checks.
//!
//! Each check takes a store (any strategy, behind `&DynInboxStore<Note>`) in a fresh database and
//! panics with a description when the store misbehaves. `tests/inbox.rs` runs every check against
//! every strategy; a new strategy gets the whole suite by adding one line there.

use super::SetUp;
use mongo_social::error::Invalid;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::try_join_all;
use serde::{Deserialize, Serialize};

use crate::CommandCounter;
use mongo_social::inbox::{DynInboxStore, Message, MessageId, NewMessage, Strategy};
use mongo_social::test_support::{inbox_cursor, LOCKED_ROUND};
use mongo_social::{Cursor, Error, PageRequest};

/// The payload the suite sends: who sent it and the sender's running number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// The sender, repeated in the payload to check it survives the round trip.
    pub sender: String,
    /// The sender's running number: a sender's messages must read back in this order.
    pub seq: u32,
    /// Free text.
    pub text: String,
}

impl Note {
    /// A note from `sender` with running number `seq`.
    pub fn new(sender: &str, seq: u32) -> Self {
        Self {
            sender: sender.to_owned(),
            seq,
            text: format!("{sender} #{seq}"),
        }
    }
}

type Store = DynInboxStore<Note>;

/// How many senders and messages the volume checks use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Volume {
    /// Concurrent senders.
    pub senders: u32,
    /// Messages each sender sends in [`concurrent_senders`].
    pub per_sender: u32,
    /// Messages each sender sends in [`large_inbox`].
    pub large_per_sender: u32,
}

impl Volume {
    /// The full volume: 8 senders, 480 messages to overlapping recipients, an inbox of 3,200.
    pub const FULL: Volume = Volume {
        senders: 8,
        per_sender: 60,
        large_per_sender: 400,
    };

    /// The volume for `strategy` on this server. Servers whose updates are not atomic (FerretDB
    /// 1.x) make [`mongo_social::BucketedFanOut`] lock each recipient and scan every bucket on every
    /// update, so there the checks keep 8 senders but send fewer messages (still hundreds to
    /// overlapping recipients, and an inbox of a thousand), and say so on stderr.
    pub fn for_server(info: &mongo_social::server::ServerInfo, strategy: Strategy) -> Volume {
        if strategy == Strategy::BucketedFanOut && !info.capabilities().atomic_updates {
            let reduced = Volume {
                senders: 8,
                per_sender: 25,
                large_per_sender: 125,
            };
            crate::note(&format!(
                "{strategy} on {}: volume reduced to {reduced:?} (updates are not atomic there, \
                 so delivery serializes per recipient)",
                info.describe()
            ));
            return reduced;
        }
        Volume::FULL
    }
}

/// Sends `count` notes from `from` to `to`, one after another, returning them in send order.
pub async fn send_sequence(
    store: &Store,
    from: &str,
    to: &[&str],
    count: u32,
) -> Vec<Message<Note>> {
    let mut sent = Vec::with_capacity(count as usize);
    for seq in 0..count {
        let message = NewMessage::new(from, to.iter().copied(), Note::new(from, seq));
        sent.push(store.send(message).await.expect("send").message);
    }
    sent
}

/// Reads `owner`'s whole inbox page by page, checking that every page but the last is full.
pub async fn read_all(store: &Store, owner: &str, page_size: usize) -> Vec<Message<Note>> {
    let mut all = Vec::new();
    let mut request = PageRequest::first(page_size);
    loop {
        let page = store.inbox_page(owner, request).await.expect("inbox page");
        all.extend(page.items.iter().cloned());
        match page.next {
            Some(cursor) => {
                assert_eq!(
                    page.items.len(),
                    page_size,
                    "a page before the last is short"
                );
                request = PageRequest::after(page_size, cursor);
            }
            None => return all,
        }
    }
}

fn ids(messages: &[Message<Note>]) -> Vec<MessageId> {
    messages.iter().map(|m| m.id).collect()
}

/// Messages read back newest first, with every field as sent.
pub async fn newest_first(store: &Store) {
    let mut sent = send_sequence(store, "joe", &["bob"], 3).await;
    sent.extend(send_sequence(store, "ann", &["bob", "jane"], 2).await);
    let page = store
        .inbox_page("bob", PageRequest::first(10))
        .await
        .expect("page");
    sent.reverse();
    assert_eq!(
        page.items, sent,
        "bob's inbox is not the sent messages, newest first"
    );
    assert_eq!(page.next, None);
    let first = &page.items[0];
    assert_eq!(first.from, "ann");
    assert_eq!(first.to, ["bob", "jane"]);
    assert_eq!(first.payload, Note::new("ann", 1));
}

/// An owner with no messages has an empty inbox and a count of 0.
pub async fn empty_inbox(store: &Store) {
    let page = store
        .inbox_page("nobody", PageRequest::first(50))
        .await
        .expect("page");
    assert!(page.items.is_empty());
    assert_eq!(page.next, None);
    assert_eq!(store.count("nobody").await.expect("count"), 0);
}

/// One message to several recipients: each inbox holds it once, under the same id; the sender's
/// own inbox does not.
pub async fn group_message(store: &Store) {
    let group = ["ann", "bob", "cid", "dee"];
    let sent = store
        .send(NewMessage::new("eve", group, Note::new("eve", 0)))
        .await
        .expect("send")
        .message;
    for owner in group {
        let page = store
            .inbox_page(owner, PageRequest::first(10))
            .await
            .expect("page");
        assert_eq!(ids(&page.items), [sent.id], "{owner}'s inbox");
        assert_eq!(page.items[0].to, group);
        assert_eq!(store.count(owner).await.expect("count"), 1);
    }
    assert_eq!(store.count("eve").await.expect("count"), 0);
}

/// Counts follow every send, per owner.
pub async fn counts(store: &Store) {
    send_sequence(store, "joe", &["bob", "jane"], 7).await;
    send_sequence(store, "joe", &["bob"], 5).await;
    assert_eq!(store.count("bob").await.expect("count"), 12);
    assert_eq!(store.count("jane").await.expect("count"), 7);
    assert_eq!(store.count("joe").await.expect("count"), 0);
}

/// Every page size walks the whole inbox with no gap and no repeat, across bucket boundaries.
pub async fn complete_pagination(store: &Store) {
    let total = 237;
    let mut sent = send_sequence(store, "joe", &["bob"], total).await;
    sent.reverse();
    let expected = ids(&sent);
    for page_size in [1, 7, 49, 50, 51, 100, 237, 1000] {
        let read = read_all(store, "bob", page_size).await;
        assert_eq!(ids(&read), expected, "page size {page_size}");
    }
}

/// New messages arriving between pages neither shift nor repeat the older ones.
pub async fn pagination_while_messages_arrive(store: &Store) {
    let mut older = send_sequence(store, "joe", &["bob"], 120).await;
    older.reverse();
    let first = store
        .inbox_page("bob", PageRequest::first(30))
        .await
        .expect("page");
    assert_eq!(ids(&first.items), ids(&older[..30]));
    let newer = send_sequence(store, "ann", &["bob"], 75).await;
    let mut rest = first.items;
    let mut cursor = first.next;
    while let Some(after) = cursor {
        let page = store
            .inbox_page("bob", PageRequest::after(30, after))
            .await
            .expect("page");
        rest.extend(page.items);
        cursor = page.next;
    }
    assert_eq!(
        ids(&rest),
        ids(&older),
        "pages after the first changed under new arrivals"
    );
    let mut everything = newer;
    everything.reverse();
    everything.extend(older);
    assert_eq!(ids(&read_all(store, "bob", 64).await), ids(&everything));
}

/// An inbox of thousands of messages, written by concurrent senders, reads back whole.
pub async fn large_inbox(store: Arc<Store>, volume: Volume) {
    let senders = volume.senders;
    let per_sender = volume.large_per_sender;
    let tasks = (0..senders).map(|s| {
        let store = Arc::clone(&store);
        async move {
            let from = format!("sender{s}");
            let mut sent = Vec::new();
            for seq in 0..per_sender {
                let message = NewMessage::new(from.as_str(), ["big"], Note::new(&from, seq));
                sent.push(store.send(message).await?.message);
            }
            Ok::<_, Error>(sent)
        }
    });
    let sent: Vec<Message<Note>> = try_join_all(tasks).await.expect("send").concat();
    let total = (senders * per_sender) as usize;
    assert_eq!(store.count("big").await.expect("count") as usize, total);
    let read = read_all(&*store, "big", 500).await;
    assert_eq!(read.len(), total);
    assert_same_set(&read, &sent, "big");
    assert_sender_order(&read, "big");
    assert_time_order(store.strategy(), &read);
}

/// Eight concurrent senders, hundreds of messages to overlapping recipients: every message lands
/// exactly once in each of its recipients' inboxes, each sender's messages in order.
pub async fn concurrent_senders(store: Arc<Store>, volume: Volume) {
    let people: Vec<String> = (0..10).map(|i| format!("user{i}")).collect();
    let senders = volume.senders;
    let per_sender = volume.per_sender;
    let tasks = (0..senders).map(|s| {
        let store = Arc::clone(&store);
        let people = people.clone();
        async move {
            let from = format!("sender{s}");
            let mut sent = Vec::new();
            for seq in 0..per_sender {
                // Everyone writes to user0; the rest overlap in a pattern that varies by sender.
                let mut to = vec![people[0].clone()];
                for (i, person) in people.iter().enumerate().skip(1) {
                    if (i as u32 + seq + s).is_multiple_of(3) {
                        to.push(person.clone());
                    }
                }
                sent.push(
                    store
                        .send(NewMessage::new(from.as_str(), to, Note::new(&from, seq)))
                        .await?
                        .message,
                );
            }
            Ok::<_, Error>(sent)
        }
    });
    let sent: Vec<Message<Note>> = try_join_all(tasks).await.expect("send").concat();
    for owner in &people {
        let expected: Vec<Message<Note>> = sent
            .iter()
            .filter(|m| m.to.contains(owner))
            .cloned()
            .collect();
        let read = read_all(&*store, owner, 37).await;
        assert_same_set(&read, &expected, owner);
        assert_sender_order(&read, owner);
        assert_time_order(store.strategy(), &read);
        assert_eq!(
            store.count(owner).await.expect("count") as usize,
            expected.len(),
            "{owner}"
        );
    }
}

/// Sixteen concurrent senders (by default) to a few shared inboxes: every page of every inbox
/// reads newest first by `sent` (`sent` never increases down an inbox, across pages too), and no
/// message is lost or repeated across pages. This is the order [`mongo_social::InboxStore`] promises
/// for every strategy, on every server path (atomic updates or locks).
pub async fn sent_order_under_concurrency(store: Arc<Store>, senders: u32, per_sender: u32) {
    let inboxes = ["ord0", "ord1", "ord2"];
    let tasks = (0..senders).map(|s| {
        let store = Arc::clone(&store);
        async move {
            let from = format!("sender{s}");
            let mut sent = Vec::new();
            for seq in 0..per_sender {
                // Everyone writes to ord0; ord1 and ord2 get every other message, staggered.
                let mut to = vec![inboxes[0]];
                to.push(inboxes[1 + ((s + seq) % 2) as usize]);
                let message = NewMessage::new(from.as_str(), to, Note::new(&from, seq));
                sent.push(store.send(message).await?.message);
            }
            Ok::<_, Error>(sent)
        }
    });
    let sent: Vec<Message<Note>> = try_join_all(tasks).await.expect("send").concat();
    for owner in inboxes {
        let expected: Vec<Message<Note>> = sent
            .iter()
            .filter(|m| m.to.iter().any(|to| to == owner))
            .cloned()
            .collect();
        for page_size in [7, 50] {
            let mut request = PageRequest::first(page_size);
            let mut read: Vec<Message<Note>> = Vec::new();
            loop {
                let page = store.inbox_page(owner, request).await.expect("inbox page");
                for pair in page.items.windows(2) {
                    assert!(
                        pair[0].sent >= pair[1].sent,
                        "{owner}, pages of {page_size}: {} (sent {}) above {} (sent {}) on one \
                         page",
                        pair[0].payload.text,
                        pair[0].sent,
                        pair[1].payload.text,
                        pair[1].sent
                    );
                }
                if let (Some(above), Some(below)) = (read.last(), page.items.first()) {
                    assert!(
                        above.sent >= below.sent,
                        "{owner}, pages of {page_size}: {} (sent {}) ends a page above {} \
                         (sent {})",
                        above.payload.text,
                        above.sent,
                        below.payload.text,
                        below.sent
                    );
                }
                read.extend(page.items);
                match page.next {
                    Some(cursor) => request = PageRequest::after(page_size, cursor),
                    None => break,
                }
            }
            assert_same_set(&read, &expected, owner);
            assert_sender_order(&read, owner);
        }
    }
}

/// Round trips: an inbox page is one `find` (bucketed: the newest 50 in at most 2 `find`/`getMore`,
/// the newest 100 in at most 3); a send to 100 recipients costs 2 commands (fan-out: the
/// recipients' mute and block lists, then the write), or at most 5 for buckets on MongoDB (3
/// plus twice the `update`s the pushes take where commands carry fewer statements, as on
/// DocumentDB; on servers without atomic updates, at most 8 per batch of recipients one
/// `update` command carries); fan out on write one more, for the list it stores apart.
pub async fn command_counts(store: &Store, commands: &CommandCounter) {
    let recipients: Vec<String> = (0..100).map(|i| format!("r{i}")).collect();
    let recipient_refs: Vec<&str> = recipients.iter().map(String::as_str).collect();
    send_sequence(store, "joe", &["bob"], 120).await;
    // Detection commands and first-use costs are not part of what is measured.
    store.count("bob").await.expect("count");

    for (limit, max_reads) in [(50, 2), (100, 3), (20, 1)] {
        let (page, names) = commands
            .measure(store.inbox_page("bob", PageRequest::first(limit)))
            .await;
        let page = page.expect("page");
        assert_eq!(page.items.len(), limit);
        let reads = names
            .iter()
            .filter(|n| *n == "find" || *n == "getMore")
            .count();
        assert_eq!(reads, names.len(), "only reads for a page: {names:?}");
        match store.strategy() {
            Strategy::BucketedFanOut => assert!(reads <= max_reads, "newest {limit}: {names:?}"),
            _ => assert_eq!(names, ["find"], "newest {limit}"),
        }
        // The next page costs the same.
        let next = page.next.expect("more pages");
        let (_, names) = commands
            .measure(store.inbox_page("bob", PageRequest::after(limit, next)))
            .await;
        assert_eq!(names, ["find"], "page after the newest {limit}");
    }

    let mut costs = Vec::new();
    for round in 0..2 {
        let message = NewMessage::new(
            "joe",
            recipient_refs.iter().copied(),
            Note::new("joe", round),
        );
        let (sent, names) = commands.measure(store.send(message)).await;
        sent.expect("send");
        costs.push(names);
    }
    let capabilities = crate::server_info().await.capabilities();
    // Fan out on write stores a list of more than 16 names once, in an `insert` that goes out
    // with the filters' `find` (buckets keep it in the message's record, written anyway).
    let shared_list = usize::from(store.strategy() == Strategy::FanOutOnWrite);
    for names in &costs {
        let limit = shared_list
            + match store.strategy() {
                // Heads, the record, the pushes in `update`s of the statements one command
                // carries, and on roll-over a check, heads and those pushes again.
                Strategy::BucketedFanOut if capabilities.atomic_updates => {
                    3 + 2 * 100_usize.div_ceil(capabilities.max_update_statements)
                }
                // Without atomic updates, per round of locked recipients: a lock, heads, the
                // target buckets (one `find`, or up to 8 by `_id`), the pushes in `update`s of
                // the statements one command carries, an unlock, and on roll-over heads, the next
                // buckets and pushes again.
                Strategy::BucketedFanOut => {
                    let pushes = LOCKED_ROUND.div_ceil(capabilities.max_update_statements);
                    100_usize.div_ceil(LOCKED_ROUND) * (3 + 2 * (8 + pushes))
                }
                // The recipients' filters, then the insert.
                _ => 2,
            };
        assert!(
            names.len() <= limit,
            "send to 100 recipients cost {names:?}"
        );
    }
    let (_, names) = commands.measure(store.count("r1")).await;
    assert_eq!(names.len(), 1, "count: {names:?}");
}

/// Bad input fails with a typed error, before anything is written.
pub async fn bad_input(store: &Store) {
    let send = |from: &str, to: Vec<&str>| store.send(NewMessage::new(from, to, Note::new("x", 0)));
    assert!(matches!(
        send("joe", vec![]).await,
        Err(Error::InvalidInput {
            reason: Invalid::NoRecipients,
            ..
        })
    ));
    assert!(matches!(
        send("joe", vec!["bob", "ann", "bob"]).await,
        Err(Error::InvalidInput { reason: Invalid::DuplicateRecipient { recipient }, .. }) if recipient == "bob"
    ));
    // Empty and whitespace-only ids are the same error, in every module.
    for blank in ["", " ", "\t "] {
        assert!(
            matches!(
                send(blank, vec!["bob"]).await,
                Err(Error::InvalidInput {
                    reason: Invalid::Blank { what: "sender" },
                    ..
                })
            ),
            "sender {blank:?}"
        );
        assert!(
            matches!(
                send("joe", vec!["bob", blank]).await,
                Err(Error::InvalidInput {
                    reason: Invalid::Blank { what: "recipient" },
                    ..
                })
            ),
            "recipient {blank:?}"
        );
        assert!(
            matches!(
                store.inbox_page(blank, PageRequest::first(5)).await,
                Err(Error::InvalidInput {
                    reason: Invalid::Blank { what: "owner" },
                    ..
                })
            ),
            "owner {blank:?}"
        );
        assert!(
            matches!(
                store.count(blank).await,
                Err(Error::InvalidInput {
                    reason: Invalid::Blank { what: "owner" },
                    ..
                })
            ),
            "count {blank:?}"
        );
    }
    let huge = Note {
        sender: "joe".into(),
        seq: 0,
        text: "x".repeat(17 * 1024 * 1024),
    };
    assert!(matches!(
        store
            .send(NewMessage::new("joe", ["bob", "ann"], huge))
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::TooLarge {
                what: "message",
                ..
            },
            ..
        })
    ));
    for owner in ["bob", "ann"] {
        assert_eq!(
            store.count(owner).await.expect("count"),
            0,
            "{owner} got a partial write"
        );
    }

    send_sequence(store, "joe", &["bob"], 3).await;
    // Text that is not a whole cursor is refused as it is parsed.
    for text in [
        "", "garbage", "t.1", "r.1", "w.x.y", "b.", "b.0", "b.-4", "r.1.zzzz", "w.1.zzzz",
    ] {
        let result = text.parse::<Cursor>();
        assert!(
            matches!(
                result,
                Err(Error::InvalidInput {
                    reason: Invalid::Cursor { .. },
                    ..
                })
            ),
            "cursor {text:?}: {result:?}"
        );
    }
    // Whole cursors of an inbox (tags `ir`, `iw`, `ib`, and one no inbox has) whose position
    // no strategy made.
    for (tag, position) in [
        ("it", &["1"][..]),
        ("ir", &["1"]),
        ("iw", &["x", "y"]),
        ("ib", &[""]),
        ("ib", &["0"]),
        ("ib", &["-4"]),
        ("ir", &["1", "zzzz"]),
        ("iw", &["1", "zzzz"]),
    ] {
        let cursor = inbox_cursor(tag, "bob", position);
        let result = store
            .inbox_page("bob", PageRequest::after(10, cursor))
            .await;
        assert!(
            matches!(
                result,
                Err(Error::InvalidInput {
                    reason: Invalid::Cursor { .. },
                    ..
                })
            ),
            "cursor {tag} {position:?}: {result:?}"
        );
    }
    // Well-formed cursors of the other strategies (see also [`foreign_cursors`]).
    for (tag, position) in [
        ("ir", &["1700000000000", "65a0b0c0d0e0f00112233445"][..]),
        ("iw", &["1700000000000", "65a0b0c0d0e0f00112233445"]),
        ("ib", &["17"]),
    ] {
        let own = match store.strategy() {
            Strategy::FanOutOnRead => "ir",
            Strategy::FanOutOnWrite => "iw",
            _ => "ib",
        };
        if tag == own {
            continue;
        }
        let foreign = inbox_cursor(tag, "bob", position);
        let cursor = foreign.clone();
        assert!(
            matches!(
                store
                    .inbox_page("bob", PageRequest::after(10, cursor))
                    .await,
                Err(Error::InvalidInput {
                    reason: Invalid::Cursor { .. },
                    ..
                })
            ),
            "{} accepted {foreign}",
            store.strategy()
        );
    }
    for limit in [0, PageRequest::MAX_LIMIT + 1] {
        assert!(matches!(
            store.inbox_page("bob", PageRequest::first(limit)).await,
            Err(Error::InvalidInput {
                reason: Invalid::PageLimit { .. },
                ..
            })
        ));
    }
    assert!(matches!(
        store.inbox_page("", PageRequest::first(5)).await,
        Err(Error::InvalidInput {
            reason: Invalid::Blank { what: "owner" },
            ..
        })
    ));
    assert_eq!(store.count("bob").await.expect("count"), 3);
}

/// A cursor made by one strategy is refused by every other with [`Invalid::Cursor`], as
/// text or as the value itself, and still works in its own strategy. `stores` holds one store
/// of each strategy, in one database.
pub async fn foreign_cursors(stores: &[Arc<Store>]) {
    let mut cursors = Vec::new();
    for store in stores {
        send_sequence(&**store, "joe", &["bob"], 3).await;
        let page = store
            .inbox_page("bob", PageRequest::first(1))
            .await
            .expect("page");
        let cursor = page.next.expect("more than one page");
        let rest = store
            .inbox_page("bob", PageRequest::after(5, cursor.clone()))
            .await
            .expect("its own cursor");
        assert_eq!(rest.items.len(), 2, "{}", store.strategy());
        cursors.push((store.strategy(), cursor));
    }
    for store in stores {
        for (made_by, cursor) in &cursors {
            if *made_by == store.strategy() {
                continue;
            }
            let reparsed: Cursor = cursor.as_str().parse().expect("a whole cursor parses");
            for cursor in [cursor.clone(), reparsed] {
                let result = store
                    .inbox_page("bob", PageRequest::after(5, cursor.clone()))
                    .await;
                assert!(
                    matches!(
                        result,
                        Err(Error::InvalidInput {
                            reason: Invalid::Cursor { .. },
                            ..
                        })
                    ),
                    "{} accepted the {made_by} cursor {cursor}: {result:?}",
                    store.strategy()
                );
            }
        }
    }
}

/// Setup is idempotent: `first` creates its indexes and takes mail; `second`, a new store on the
/// same database (the application's next start), creates its indexes again, reads what was
/// written and takes more.
pub async fn reopen(first: &Store, second: &Store) {
    first.set_up().await.expect("create indexes");
    let mut sent = send_sequence(first, "joe", &["bob", "ann"], 3).await;
    second
        .set_up()
        .await
        .expect("create indexes on the next start");
    second
        .set_up()
        .await
        .expect("create indexes again, same store");
    sent.extend(send_sequence(second, "joe", &["bob"], 2).await);
    sent.reverse();
    assert_eq!(read_all(second, "bob", 2).await, sent, "bob after a reopen");
    assert_eq!(second.count("ann").await.expect("count"), 3);
}

/// A store used before [`mongo_social::InboxStore::create_indexes`] was called still keeps every
/// promise: a strategy whose correctness depends on an index creates it before its first write
/// (once per store). 120 messages cross two bucket boundaries of the default bucket size.
pub async fn without_create_indexes(store: &Store) {
    let mut sent = send_sequence(store, "joe", &["bob"], 120).await;
    sent.extend(send_sequence(store, "ann", &["bob", "cid"], 5).await);
    sent.reverse();
    assert_eq!(store.count("bob").await.expect("count"), 125);
    assert_eq!(store.count("cid").await.expect("count"), 5);
    for page_size in [7, 50] {
        assert_eq!(
            ids(&read_all(store, "bob", page_size).await),
            ids(&sent),
            "pages of {page_size}"
        );
    }
    // Deliveries rely on the same indexes never to give a second copy.
    store
        .deliver(&sent[0], &["cid".to_owned(), "dee".to_owned()])
        .await
        .expect("deliver");
    store
        .deliver(&sent[0], &["cid".to_owned(), "dee".to_owned()])
        .await
        .expect("deliver again");
    assert_eq!(store.count("cid").await.expect("count"), 5);
    assert_eq!(store.count("dee").await.expect("count"), 1);
}

fn assert_same_set(read: &[Message<Note>], expected: &[Message<Note>], owner: &str) {
    let read_ids: Vec<MessageId> = ids(read);
    let unique: HashSet<MessageId> = read_ids.iter().copied().collect();
    assert_eq!(
        unique.len(),
        read_ids.len(),
        "{owner}'s inbox repeats a message"
    );
    let expected_ids: HashSet<MessageId> = expected.iter().map(|m| m.id).collect();
    assert_eq!(
        unique, expected_ids,
        "{owner}'s inbox is not the messages sent to them"
    );
}

/// Within one inbox, each sender's messages appear newest first.
fn assert_sender_order(read: &[Message<Note>], owner: &str) {
    let mut last_seq: HashMap<&str, u32> = HashMap::new();
    for message in read {
        if let Some(previous) = last_seq.insert(&message.payload.sender, message.payload.seq) {
            assert!(
                message.payload.seq < previous,
                "{owner}: {}'s #{} after #{previous}",
                message.payload.sender,
                message.payload.seq
            );
        }
    }
}

/// Every inbox reads newest first by `sent`. Strategies ordered by send time read back in
/// strictly decreasing `(sent, id)`; buckets keep arrival order, with `sent` never increasing
/// down the inbox.
fn assert_time_order(strategy: Strategy, read: &[Message<Note>]) {
    for pair in read.windows(2) {
        let ordered = if strategy == Strategy::BucketedFanOut {
            pair[0].sent >= pair[1].sent
        } else {
            (pair[0].sent, pair[0].id) > (pair[1].sent, pair[1].id)
        };
        assert!(
            ordered,
            "out of time order: {:?} before {:?}",
            (pair[0].sent, pair[0].id),
            (pair[1].sent, pair[1].id)
        );
    }
}

/// [`mongo_social::InboxStore::deliver`]: a sent message delivered again, to new recipients, repeated
/// and concurrently, lands exactly once in each inbox, with its id and time; bad recipient lists
/// are refused.
pub async fn deliver_is_idempotent(store: Arc<Store>) {
    // Other mail first, so the delivered message is not alone in the inboxes.
    send_sequence(&*store, "zed", &["bob", "cat", "dan"], 3).await;
    let sent = store
        .send(NewMessage::new("amy", ["bob"], Note::new("amy", 0)))
        .await
        .unwrap()
        .message;
    let everyone: Vec<String> = ["bob", "cat", "dan", "eve", "fay", "gus"]
        .map(str::to_owned)
        .to_vec();
    store.deliver(&sent, &everyone[1..3]).await.unwrap();
    store.deliver(&sent, &everyone[1..3]).await.unwrap(); // a retried batch
    store.deliver(&sent, &everyone[..2]).await.unwrap(); // overlapping, bob already had it
    let mut tasks = Vec::new();
    for start in 0..6 {
        let store = store.clone();
        let sent = sent.clone();
        let batch: Vec<String> = (0..3).map(|i| everyone[(start + i) % 6].clone()).collect();
        tasks.push(tokio::spawn(async move {
            store.deliver(&sent, &batch).await.unwrap();
            store.deliver(&sent, &batch).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for owner in &everyone {
        let inbox = read_all(&*store, owner, 7).await;
        let copies: Vec<&Message<Note>> = inbox.iter().filter(|m| m.id == sent.id).collect();
        assert_eq!(copies.len(), 1, "{owner} holds the message exactly once");
        assert_eq!(copies[0].sent, sent.sent, "{owner}: the sent time is kept");
        assert_eq!(copies[0].payload, sent.payload);
        assert_eq!(copies[0].from, "amy");
        let others = if ["bob", "cat", "dan"].contains(&owner.as_str()) {
            3
        } else {
            0
        };
        assert_eq!(inbox.len(), others + 1, "{owner}: nothing else was added");
        assert_eq!(store.count(owner).await.unwrap(), others as u64 + 1);
    }
    let error = store.deliver(&sent, &[]).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::NoRecipients,
                ..
            }
        ),
        "{error}"
    );
    let twice = ["hal".to_owned(), "hal".to_owned()];
    let error = store.deliver(&sent, &twice).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::DuplicateRecipient { .. },
                ..
            }
        ),
        "{error}"
    );
    let error = store.deliver(&sent, &[String::new()]).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Blank { what: "recipient" },
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(store.count("hal").await.unwrap(), 0, "nothing written");
}

/// Senders keep sending through [`FaultProxy::outage_during`](crate::fault_proxy::FaultProxy::outage_during):
/// replies lost, then every connection cut and new ones refused for 3 seconds, then cut once
/// more. `store` and `impatient` must be one store's collections through a client connected via
/// `proxy`; half the senders use `impatient`, whose retry budget
/// ([`impatient_retry`](crate::impatient_retry)) is shorter than the outage.
///
/// Afterwards: every send that returned `Ok` is in each recipient's inbox exactly once; one that
/// returned an error is in no inbox twice (a send that fails part-way may have reached some
/// recipients, as documented); every count equals what its inbox holds; and some impatient send
/// did fail, so the error branch was checked.
pub async fn survives_outage(
    store: Arc<Store>,
    impatient: Arc<Store>,
    proxy: &crate::fault_proxy::FaultProxy,
) {
    const SENDERS: u32 = 4;
    const PER_SENDER: u32 = 30;
    let users = ["ann", "bob", "cat", "dan", "eve"];
    let mut tasks = Vec::new();
    for s in 0..SENDERS {
        let store = if s % 2 == 0 { &store } else { &impatient }.clone();
        tasks.push(tokio::spawn(async move {
            let from = format!("sender{s}");
            let mut outcomes = Vec::new();
            for seq in 0..PER_SENDER {
                let to: Vec<&str> = (0..3).map(|i| users[(s + seq + i) as usize % 5]).collect();
                let message = NewMessage::new(&from, to.iter().copied(), Note::new(&from, seq));
                let outcome = store.send(message).await;
                if let Err(error) = &outcome {
                    assert!(error.is_retryable(), "only transient failures: {error}");
                }
                outcomes.push((
                    seq,
                    to.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                    outcome.is_ok(),
                ));
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            (from, outcomes)
        }));
    }
    let sent = proxy.outage_during(tasks).await;

    let mut inboxes: HashMap<&str, Vec<Message<Note>>> = HashMap::new();
    for user in users {
        let inbox = read_all(&*store, user, 16).await;
        assert_eq!(
            store.count(user).await.expect("count"),
            inbox.len() as u64,
            "{user}: the count is what the inbox holds"
        );
        inboxes.insert(user, inbox);
    }
    let mut failed = 0;
    for (from, outcomes) in &sent {
        for (seq, to, ok) in outcomes {
            failed += usize::from(!ok);
            for user in users {
                let copies = inboxes[user]
                    .iter()
                    .filter(|m| m.payload.sender == *from && m.payload.seq == *seq)
                    .count();
                let expected = to.iter().any(|t| t == user);
                if *ok {
                    assert_eq!(
                        copies,
                        usize::from(expected),
                        "{from} #{seq} in {user}'s inbox"
                    );
                } else {
                    assert!(
                        copies <= usize::from(expected),
                        "{from} #{seq}: never twice"
                    );
                }
            }
        }
    }
    crate::note(&format!(
        "survives_outage: {} sends, {failed} failed; proxy lost {} replies, accepted {} and \
         refused {} connections",
        SENDERS * PER_SENDER,
        proxy.replies_lost(),
        proxy.connections_accepted(),
        proxy.connections_refused()
    ));
    assert!(
        failed > 0
            || proxy
                .fails_during_outage(std::time::Duration::from_secs(2), impatient.count("bob"))
                .await,
        "an impatient sender gave up during the outage"
    );
}
