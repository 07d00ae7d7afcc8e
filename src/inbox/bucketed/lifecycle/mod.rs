//! The lifecycle of a bucketed inbox: the owner's state on each entry, counters per bucket.
//!
//! Each entry carries its owner's flags (`read`, `starred`, `muted`, `blocked`) and, once
//! deleted or retracted, `gone` (the payload and recipients are dropped; `id`, `from` and
//! `sent` stay, so a repeat finds its work done). Each bucket counts its visible unread entries
//! (`unread`) and the entries pages skip (`hidden`), changed in the same atomic update as the
//! entries they count: a push adds `unread: 1` (or `hidden: 1` for a muted sender), and every
//! lifecycle write below moves both by what it changed. So counts are exact under any
//! concurrency, and never negative: the unread count sums `unread` over the owner's full buckets
//! that have any (one `find` of a partial index) and the newest bucket (one `find` by `_id`, at
//! the same time), [`InboxStore::count`] sums `count - hidden` over the owner's buckets (one
//! `find` of a range of `_id`).
//!
//! A write finds its buckets by `_id`: the owner's range of it (an entry of the owner's, looked
//! for newest bucket first), or, for the sender's retract and edit, the range of each recipient
//! from the bucket the message's record says it went to or after.
//!
//! Entries are never moved: a write addresses one by its index in the bucket
//! (`messages.7.read`), so positions, pages and cursors stay as they were, and no positional
//! (`$`) or array-filter update is needed (not every server has them). Every write is a round of
//! [`Buckets::converge`]: read the buckets concerned (one `find`, flags only), compute each
//! bucket's change from what was read, and send all of them in one `update` command, each
//! statement guarded by the bucket's revision as read (`rev`, incremented by each of these
//! writes). A statement whose bucket changed meanwhile matches nothing; the round is then read
//! and computed again, and what is already done drops out. The same holds after a lost reply:
//! a resent statement no longer matches its revision, and the next read finds the work done. So
//! a write costs 2 commands when nothing races it, and never applies twice. Pushes do not
//! change `rev`: they only append, and their `$inc` commutes with the lifecycle's.
//!
//! Where updates are not atomic, each write holds its owners' locks (the same
//! ones a send to them takes), so rounds never race.

mod converge;
mod store;

use std::sync::atomic::{AtomicI64, Ordering};

use super::{
    owner_buckets, owner_from_hex, BucketedFanOut, Buckets, FULL_UNREAD_INDEX, MAX_ROUNDS, PLACED,
};
use crate::bson_ext::integer;
use crate::inbox::filters::Filter;
use crate::inbox::filters::FilterLists;
use crate::inbox::lifecycle::{message_not_found, not_sender};
use crate::inbox::retention::Retention;
use crate::inbox::up_to::UpTo;
use crate::inbox::{cursor, validate, MessageId, Payload};
use crate::{Error, Result};
use async_trait::async_trait;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::Hint;

/// An entry's tombstone mark: `"deleted"` (by its owner) or `"retracted"` (by its sender).
const GONE: &str = "gone";

/// Whether pages show a stored entry: not a tombstone, not from a muted or blocked sender.
pub(in crate::inbox) fn shown(entry: &Document) -> bool {
    !entry.contains_key(GONE)
        && !flag(entry, Filter::Mute.field())
        && !flag(entry, Filter::Block.field())
}

fn flag(entry: &Document, name: &str) -> bool {
    entry.get_bool(name).unwrap_or(false)
}

/// What a lifecycle write reads of an entry.
#[derive(Clone, Debug, Default)]
struct Seen {
    index: usize,
    id: Option<ObjectId>,
    from: String,
    read: bool,
    starred: bool,
    gone: bool,
    muted: bool,
    blocked: bool,
}

impl Seen {
    fn parse(index: usize, entry: &Document) -> Self {
        Self {
            index,
            id: entry.get_object_id("id").ok(),
            from: entry.get_str("from").unwrap_or_default().to_owned(),
            read: flag(entry, "read"),
            starred: flag(entry, "starred"),
            gone: entry.contains_key(GONE),
            muted: flag(entry, Filter::Mute.field()),
            blocked: flag(entry, Filter::Block.field()),
        }
    }

    fn visible(&self) -> bool {
        !self.gone && !self.muted && !self.blocked
    }

    /// Whether the bucket's `unread` counts it.
    fn counted_unread(&self) -> bool {
        self.visible() && !self.read
    }

    fn is(&self, id: MessageId) -> bool {
        self.id == Some(id.0)
    }
}

/// A bucket as a lifecycle write reads it.
#[derive(Debug)]
struct Bucket {
    owner: String,
    sequence: i64,
    rev: Option<i64>,
    entries: Vec<Seen>,
    /// The entries as read, for an edit's size check (read without payloads).
    stored: Vec<Document>,
}

impl Bucket {
    fn parse(mut document: Document) -> Self {
        let stored: Vec<Document> = match document.remove("messages") {
            Some(Bson::Array(entries)) => entries
                .into_iter()
                .map(|entry| match entry {
                    Bson::Document(entry) => entry,
                    _ => Document::new(),
                })
                .collect(),
            _ => Vec::new(),
        };
        Self {
            owner: document.get_str("owner").unwrap_or_default().to_owned(),
            sequence: integer(&document, "sequence").unwrap_or(0),
            rev: integer(&document, "rev"),
            entries: stored
                .iter()
                .enumerate()
                .map(|(index, entry)| Seen::parse(index, entry))
                .collect(),
            stored,
        }
    }
}

/// How much of the buckets a round reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// The entries' ids, senders and flags.
    Flags,
    /// Everything but the payloads (an edit's size check).
    WithoutPayloads,
}

impl Read {
    fn projection(self) -> Document {
        match self {
            Read::Flags => doc! {
                "owner": 1, "sequence": 1, "rev": 1,
                "messages.id": 1, "messages.from": 1, "messages.read": 1,
                "messages.starred": 1, "messages.gone": 1, "messages.muted": 1,
                "messages.blocked": 1,
            },
            Read::WithoutPayloads => doc! { "messages.message": 0, "last_sent": 0 },
        }
    }
}

/// What a write does to each entry it selects.
#[derive(Clone, Debug)]
enum Op {
    Read(bool),
    Star(bool),
    Gone(&'static str),
    Filter(Filter, bool),
    Edit(Bson, bson::DateTime),
}

/// One bucket's change: its entries' fields, and its counters.
#[derive(Debug, Default)]
struct Change {
    set: Document,
    unset: Document,
    unread: i64,
    hidden: i64,
}

impl Change {
    fn set(&mut self, index: usize, field: &str, value: impl Into<Bson>) {
        self.set
            .insert(format!("messages.{index}.{field}"), value.into());
    }

    fn unset(&mut self, index: usize, field: &str) {
        self.unset.insert(format!("messages.{index}.{field}"), "");
    }

    /// Moves the counters by what turning `before` into `after` changed.
    fn recount(&mut self, before: &Seen, after: &Seen) {
        self.unread += i64::from(after.counted_unread()) - i64::from(before.counted_unread());
        self.hidden += i64::from(!after.visible()) - i64::from(!before.visible());
    }

    fn is_empty(&self) -> bool {
        self.set.is_empty() && self.unset.is_empty()
    }

    /// Applies `op` to the entry `seen` (nothing when it is done already).
    fn apply(&mut self, op: &Op, seen: &Seen) {
        let mut after = seen.clone();
        let i = seen.index;
        match op {
            Op::Read(read) if seen.read != *read && !seen.gone => {
                after.read = *read;
                if *read {
                    self.set(i, "read", true);
                } else {
                    self.unset(i, "read");
                }
            }
            Op::Star(starred) if seen.starred != *starred && !seen.gone => {
                if *starred {
                    self.set(i, "starred", true);
                } else {
                    self.unset(i, "starred");
                }
            }
            Op::Gone(reason) if !seen.gone => {
                after.gone = true;
                after.read = false;
                self.set(i, GONE, *reason);
                for field in ["message", "to", "to_count", "read", "starred"] {
                    self.unset(i, field);
                }
            }
            Op::Filter(filter, on) => {
                let field = filter.field();
                let current = match filter {
                    Filter::Mute => &mut after.muted,
                    Filter::Block => &mut after.blocked,
                };
                if *current == *on {
                    return;
                }
                *current = *on;
                if *on {
                    self.set(i, field, true);
                } else {
                    self.unset(i, field);
                }
            }
            Op::Edit(payload, edited) if !seen.gone => {
                self.set(i, "message", payload.clone());
                self.set(i, "edited", *edited);
            }
            _ => return,
        }
        self.recount(seen, &after);
    }

    /// The guarded statement: `{q, u}` for `bucket`, as read.
    fn statement(self, bucket: &Bucket) -> (Document, Document) {
        let mut filter = doc! {
            "_id": super::bucket_id(&bucket.owner, bucket.sequence),
            "owner": &bucket.owner,
            "sequence": bucket.sequence,
        };
        match bucket.rev {
            Some(rev) => filter.insert("rev", rev),
            None => filter.insert("rev", doc! { "$exists": false }),
        };
        let mut inc = doc! { "rev": 1_i64 };
        if self.unread != 0 {
            inc.insert("unread", self.unread);
        }
        if self.hidden != 0 {
            inc.insert("hidden", self.hidden);
        }
        let mut update = doc! { "$inc": inc };
        if !self.set.is_empty() {
            update.insert("$set", self.set);
        }
        if !self.unset.is_empty() {
            update.insert("$unset", self.unset);
        }
        (filter, update)
    }
}

/// Which entries of which buckets a write changes, and what it checks first.
struct Write<'a> {
    /// The buckets to read.
    filter: Document,
    read: Read,
    /// Fails the write, before anything is written, from what a round read.
    check: &'a (dyn Fn(&[Bucket]) -> Result<()> + Send + Sync),
    /// Whether the write changes this entry of this bucket.
    select: &'a (dyn Fn(&Bucket, &Seen) -> bool + Send + Sync),
    op: Op,
}

/// Fails with [`Error::NotFound`] when no bucket holds message `id`, with [`Forbidden::NotSender`](crate::error::Forbidden::NotSender)
/// when `sender` did not send it.
fn check_sender(buckets: &[Bucket], sender: &str, id: MessageId) -> Result<()> {
    let mut entries = buckets
        .iter()
        .flat_map(|b| &b.entries)
        .filter(|seen| seen.is(id))
        .peekable();
    if entries.peek().is_none() {
        return Err(message_not_found(id));
    }
    if entries.any(|seen| seen.from != sender) {
        return Err(not_sender(sender, id));
    }
    Ok(())
}
