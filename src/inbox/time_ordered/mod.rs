//! Reading an inbox whose documents each hold one message, ordered by `(sent, id)`: shared by
//! [`super::FanOutOnRead`] and [`super::FanOutOnWrite`], with each one's owner state
//! ([`OwnerState`]) filtered on the server. Their engine, lifecycle and transfer, written once over
//! the layout, are in [`engine`], [`lifecycle`] and [`transfer`].

pub(super) mod engine;
pub(super) mod lifecycle;
pub(super) mod transfer;

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::Hint;
use mongodb::Collection;

use super::recipient_lists::RecipientLists;
use super::{cursor, Message, MessageId, Payload, Strategy};
use crate::backend::dialect::{NewestFirst, TimeIndex};
use crate::backend::Backend;
use crate::inbox::filters::Filter;
use crate::inbox::retention::Retention;
use crate::{Page, PageRequest, Result};

/// Where a strategy keeps the owner and the message id in its documents.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    /// The strategy whose documents these are, named in its cursors.
    pub(super) strategy: Strategy,
    /// Field matched against the inbox owner (`to` or `recipient`).
    pub(super) owner_field: &'static str,
    /// Field holding the message id (`_id` or `id`).
    pub(super) id_field: &'static str,
    /// Whether a document holds its owners in an array (one document for every recipient).
    pub(super) owners_in_array: bool,
    /// Where an owner's read state, stars and hidden marks are kept.
    pub(super) state: OwnerState,
}

/// Where a strategy keeps each owner's state of a message (see [`super::lifecycle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OwnerState {
    /// On the owner's own copy: `unread: true`, `starred: true`, `gone` (a tombstone:
    /// `"deleted"` or `"retracted"`), `muted: true`, `blocked: true`.
    Copy,
    /// On a document its recipients share, as arrays of owners: `read_by`, `starred_by`,
    /// `gone_for`, `muted_for`, `blocked_for`; and `retracted` (when) for the sender's
    /// tombstone.
    Shared,
}

/// An owner's mark on a message, which each [`OwnerState`] keeps its own way.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mark {
    /// Read by the owner.
    Read,
    /// Starred by the owner.
    Starred,
    /// Hidden from the owner by their mute or block of its sender.
    Hidden(Filter),
}

impl OwnerState {
    /// What a document must satisfy to show in `owner`'s inbox: [`OwnerState::kept`], and not
    /// hidden by a mute or a block.
    pub(super) fn visible(self, owner: &str) -> Document {
        let mut filter = self.kept(owner);
        filter.extend(match self {
            OwnerState::Copy => doc! {
                "muted": { "$exists": false },
                "blocked": { "$exists": false },
            },
            OwnerState::Shared => doc! {
                "muted_for": { "$ne": owner },
                "blocked_for": { "$ne": owner },
            },
        });
        filter
    }

    /// What a document must satisfy to be in `owner`'s inbox, shown or hidden: not deleted by
    /// them, not retracted.
    pub(super) fn kept(self, owner: &str) -> Document {
        match self {
            OwnerState::Copy => doc! { "gone": { "$exists": false } },
            OwnerState::Shared => doc! {
                "retracted": { "$exists": false },
                "gone_for": { "$ne": owner },
            },
        }
    }

    /// What a document must satisfy to be not retracted (a copy: not a tombstone, which a
    /// delete leaves too).
    pub(super) fn live(self) -> Document {
        match self {
            OwnerState::Copy => doc! { "gone": { "$exists": false } },
            OwnerState::Shared => doc! { "retracted": { "$exists": false } },
        }
    }

    /// Whether the stored `document` shows in `owner`'s inbox: [`OwnerState::visible`],
    /// evaluated here: for a document a change stream brought, and for each document a page or
    /// a poll read. A server that does not read each document as of one moment can return one
    /// that a retraction, delete, mute or block changed while it was read, so that it no longer
    /// matches the read's filter (a retracted one has no recipients left to decode): the read
    /// leaves it out, as it would have had the change come first.
    pub(super) fn shows(self, document: &Document, owner: &str) -> bool {
        let names = |field: &str| named_in(document, field, owner);
        match self {
            OwnerState::Copy => ["gone", "muted", "blocked"]
                .iter()
                .all(|field| !document.contains_key(field)),
            OwnerState::Shared => {
                !document.contains_key("retracted")
                    && !["gone_for", "muted_for", "blocked_for"]
                        .iter()
                        .any(|field| names(field))
            }
        }
    }

    /// What a document must satisfy to be unread by `owner`.
    pub(super) fn unread(self, owner: &str) -> Document {
        match self {
            OwnerState::Copy => doc! { "unread": true },
            OwnerState::Shared => doc! { "read_by": { "$ne": owner } },
        }
    }

    /// The update that sets (`on`) or clears `owner`'s `mark` on a document: a flag of a copy
    /// (`unread` is kept rather than read, so reading clears it), or the owner's name in an
    /// array of a shared document. Applied twice, it applies once.
    pub(super) fn mark(self, owner: &str, mark: Mark, on: bool) -> Document {
        match self {
            OwnerState::Copy => {
                let (field, set) = match mark {
                    Mark::Read => ("unread", !on),
                    Mark::Starred => ("starred", on),
                    Mark::Hidden(filter) => (filter.field(), on),
                };
                if set {
                    doc! { "$set": { field: true } }
                } else {
                    doc! { "$unset": { field: "" } }
                }
            }
            OwnerState::Shared => {
                let field = match mark {
                    Mark::Read => "read_by",
                    Mark::Starred => "starred_by",
                    Mark::Hidden(Filter::Mute) => "muted_for",
                    Mark::Hidden(Filter::Block) => "blocked_for",
                };
                if on {
                    doc! { "$addToSet": { field: owner } }
                } else {
                    doc! { "$pull": { field: owner } }
                }
            }
        }
    }

    /// The bytes an edited document keeps free past its message, for the owners' state written
    /// on it later: arrays of names on a shared document, a few flags on a copy.
    pub(super) fn room_for_state(self) -> usize {
        match self {
            OwnerState::Copy => 64,
            OwnerState::Shared => 1024,
        }
    }

    /// Whether `owner` has read the stored `document`, and starred it.
    fn read_and_starred(self, document: &Document, owner: &str) -> (bool, bool) {
        let names = |field: &str| named_in(document, field, owner);
        match self {
            OwnerState::Copy => (
                !document.get_bool("unread").unwrap_or(false),
                document.get_bool("starred").unwrap_or(false),
            ),
            OwnerState::Shared => (names("read_by"), names("starred_by")),
        }
    }
}

/// Whether the array `field` of a shared `document` names `owner` (see [`OwnerState::Shared`]).
pub(super) fn named_in(document: &Document, field: &str, owner: &str) -> bool {
    document
        .get_array(field)
        .is_ok_and(|owners| owners.iter().any(|o| o.as_str() == Some(owner)))
}

impl Layout {
    /// The index behind every page read: owner, then send time, ties broken by id, in the
    /// order the server reads (see [`TimeIndex`]).
    pub(super) fn time_index(&self) -> TimeIndex {
        TimeIndex {
            owner_field: self.owner_field,
            id_field: self.id_field,
            owners_in_array: self.owners_in_array,
        }
    }

    /// The field a lifecycle write locks each document by where updates are not atomic (see
    /// [`Backend::update_every_owner`]): its `_id` where owners share it, so two owners' marks on
    /// one message take turns and writes on different messages never wait for each other; the
    /// owner where each owner has a copy of their own.
    pub(super) fn lock_field(&self) -> &'static str {
        if self.owners_in_array {
            "_id"
        } else {
            self.owner_field
        }
    }

    /// The documents that are `owner`'s alone: those naming no other owner.
    pub(super) fn alone(&self, owner: &str) -> Document {
        if self.owners_in_array {
            doc! { self.owner_field: [owner] }
        } else {
            doc! { self.owner_field: owner }
        }
    }

    fn sort(&self) -> Document {
        doc! { "sent": -1, self.id_field: -1 }
    }

    /// What a document must satisfy to show in `owner`'s inbox: theirs, and not hidden.
    fn shown(&self, owner: &str) -> Document {
        let mut filter = doc! { self.owner_field: owner };
        filter.extend(self.state.visible(owner));
        filter
    }
}

/// One page: `limit + 1` documents after the cursor, to learn whether another page follows, read
/// as the server reads an owner's newest first ([`Dialect::newest_first`](crate::backend::dialect::Dialect::newest_first)): one `find` of the
/// index range after the cursor, naming the index in a hint where the server must be told
/// (once the store's indexes exist: a hint of a missing index fails the read); for owners in
/// an array on DocumentDB, one `find` in order from the owner's newest entry
/// ([`NewestFirst::FromNewest`]). Where copies share their recipient list (`recipients`), one
/// more `find` for those lists.
pub(super) async fn read_page<P: Payload>(
    backend: &Backend,
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
    page: PageRequest,
    recipients: Option<&RecipientLists>,
) -> Result<Page<Message<P>>> {
    let after = match &page.after {
        Some(after) => Some(cursor::time_key(after, layout.strategy, owner)?),
        None => None,
    };
    let read = PageRead {
        collection,
        layout,
        owner,
        after,
        fetch: page.fetch(),
    };
    let dialect = backend.dialect().await?;
    let mut documents = match dialect.newest_first(&layout.time_index()) {
        NewestFirst::Sorted => read.sorted(None).await?,
        NewestFirst::Hinted(keys) => {
            backend.ensure_indexes().await?;
            read.sorted(Some(keys)).await?
        }
        NewestFirst::FromNewest { ordered, unordered } => {
            backend.ensure_indexes().await?;
            match read.newest_on(ordered).await {
                Err(error) if dialect.gave_up_ordered_scan(&error) => {
                    read.sorted(Some(unordered)).await?
                }
                documents => documents?,
            }
        }
    };
    let more = documents.len() > page.limit;
    documents.truncate(page.limit);
    // The next page starts after the last document read, shown or not.
    let next = match documents.last() {
        Some(last) if more => Some(cursor_after(collection.name(), layout, owner, last)?),
        _ => None,
    };
    // Changed while the server read it (see `OwnerState::shows`).
    documents.retain(|document| layout.state.shows(document, owner));
    if let Some(recipients) = recipients {
        recipients.restore(&mut documents, layout.id_field).await?;
    }
    let items = documents
        .into_iter()
        .map(|document| decode(collection.name(), document, layout, owner))
        .collect::<Result<Vec<Message<P>>>>()?;
    Ok(Page { items, next })
}

/// The cursor after `document`, read from `collection` for `owner`'s inbox.
fn cursor_after(
    collection: &str,
    layout: Layout,
    owner: &str,
    document: &Document,
) -> Result<crate::page::Cursor> {
    let (Ok(sent), Ok(id)) = (
        document.get_datetime("sent"),
        document.get_object_id(layout.id_field),
    ) else {
        let id = document.get("_id").cloned();
        return Err(crate::bson_ext::corrupt(
            collection,
            id,
            "no `sent` or message id",
        ));
    };
    Ok(cursor::after_time(
        layout.strategy,
        owner,
        *sent,
        MessageId(id),
    ))
}

/// The read of one page of `owner`'s inbox: what shows, after the cursor's `(sent, id)`, at
/// most `fetch` documents, newest first.
struct PageRead<'a> {
    collection: &'a Collection<Document>,
    layout: Layout,
    owner: &'a str,
    after: Option<(bson::DateTime, MessageId)>,
    fetch: usize,
}

impl PageRead<'_> {
    /// Sorted by `(sent, id)` on the server, the cursor a range (`hint`: the index to read).
    async fn sorted(&self, hint: Option<Document>) -> mongodb::error::Result<Vec<Document>> {
        let mut filter = self.layout.shown(self.owner);
        if let Some((sent, id)) = self.after {
            filter.extend(cursor::older_than_time(sent, id, self.layout.id_field));
        }
        self.newest(filter, hint).await
    }

    /// Read in order from the owner's newest entry of the `ordered` index, the cursor a filter
    /// (`$nor` of what it passed) rather than a range (see [`NewestFirst::FromNewest`]).
    async fn newest_on(&self, ordered: Document) -> mongodb::error::Result<Vec<Document>> {
        let mut filter = self.layout.shown(self.owner);
        if let Some((sent, id)) = self.after {
            filter.insert(
                "$nor",
                vec![
                    doc! { "sent": { "$gt": sent } },
                    doc! { "sent": sent, self.layout.id_field: { "$gte": id.0 } },
                ],
            );
        }
        self.newest(filter, Some(ordered)).await
    }

    /// The first `fetch` documents `filter` selects, newest first (`hint`: the index to read).
    async fn newest(
        &self,
        filter: Document,
        hint: Option<Document>,
    ) -> mongodb::error::Result<Vec<Document>> {
        let mut find = self
            .collection
            .find(filter)
            .sort(self.layout.sort())
            .limit(self.fetch as i64)
            .batch_size(self.fetch as u32);
        if let Some(keys) = hint {
            find = find.hint(Hint::Keys(keys));
        }
        find.await?.try_collect().await
    }
}

/// How many messages `owner`'s inbox shows: a counted index range.
pub(super) async fn count(
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
) -> Result<u64> {
    Ok(collection.count_documents(layout.shown(owner)).await?)
}

/// How many messages `owner`'s inbox shows unread, at most `cap`: a counted index range, which
/// stops after `cap` documents. Under a cap, where the server must be told which index serves
/// the newest-first order ([`Dialect::newest_first`](crate::backend::dialect::Dialect::newest_first)), the count names it too: DocumentDB then
/// walks the owner's index entries and stops at the cap (6.6 ms for 100 of 1,000,000 unread)
/// instead of collecting every entry first (627 ms); for owners in an array, where the ordered
/// scan gives up, the count is taken again through the unordered index.
pub(super) async fn unread_count(
    backend: &Backend,
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
    cap: Option<u64>,
) -> Result<u64> {
    let mut filter = layout.shown(owner);
    filter.extend(layout.state.unread(owner));
    let count = |hint: Option<Document>| {
        let count = collection.count_documents(filter.clone());
        let count = match cap {
            Some(cap) => count.limit(cap),
            None => count,
        };
        match hint {
            Some(keys) => count.hint(Hint::Keys(keys)),
            None => count,
        }
    };
    if cap.is_none() {
        return Ok(count(None).await?);
    }
    let dialect = backend.dialect().await?;
    Ok(match dialect.newest_first(&layout.time_index()) {
        NewestFirst::Sorted => count(None).await?,
        NewestFirst::Hinted(keys) => {
            backend.ensure_indexes().await?;
            count(Some(keys)).await?
        }
        NewestFirst::FromNewest { ordered, unordered } => {
            backend.ensure_indexes().await?;
            match count(Some(ordered)).await {
                Err(error) if dialect.gave_up_ordered_scan(&error) => {
                    count(Some(unordered)).await?
                }
                counted => counted?,
            }
        }
    })
}

/// The messages `owner`'s inbox shows that were sent at `from` or later, oldest first, at most
/// `limit`, in one `find` (and one more for shared recipient lists): what a watch polls.
pub(super) async fn arrivals<P: Payload>(
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
    from: bson::DateTime,
    limit: usize,
    recipients: Option<&RecipientLists>,
) -> Result<Vec<Message<P>>> {
    let mut filter = layout.shown(owner);
    filter.insert("sent", doc! { "$gte": from });
    let mut documents: Vec<Document> = collection
        .find(filter)
        .sort(doc! { "sent": 1, layout.id_field: 1 })
        .limit(limit as i64)
        .await?
        .try_collect()
        .await?;
    documents.retain(|document| layout.state.shows(document, owner));
    if let Some(recipients) = recipients {
        recipients.restore(&mut documents, layout.id_field).await?;
    }
    documents
        .into_iter()
        .map(|document| decode(collection.name(), document, layout, owner))
        .collect()
}

/// A message read from `collection`, with `owner`'s read state and star.
pub(super) fn decode<P: Payload>(
    collection: &str,
    mut document: Document,
    layout: Layout,
    owner: &str,
) -> Result<Message<P>> {
    let stored_id = document.get("_id").cloned();
    let (read, starred) = layout.state.read_and_starred(&document, owner);
    if layout.id_field != "id" {
        if let Some(id) = document.remove(layout.id_field) {
            document.insert("id", id);
        }
    }
    document.insert("read", Bson::Boolean(read));
    document.insert("starred", Bson::Boolean(starred));
    crate::bson_ext::decode_with_id(collection, stored_id, document)
}

/// The `$or` clauses selecting what `retention` drops of `owner`'s inbox: the messages from the
/// first past its newest `keep_newest` on (one `find` of that message), and those older than its
/// `max_age`. Empty when it keeps everything.
pub(super) async fn past_retention(
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
    retention: &Retention,
) -> Result<Vec<Document>> {
    let mut older = Vec::new();
    if let Some(keep) = retention.newest() {
        let first_dropped = collection
            .find(doc! { layout.owner_field: owner })
            .sort(doc! { "sent": -1, "id": -1 })
            .skip(keep)
            .limit(1)
            .projection(doc! { "sent": 1, "id": 1 })
            .await?
            .try_next()
            .await?;
        if let Some(found) = first_dropped {
            if let (Ok(sent), Ok(id)) = (found.get_datetime("sent"), found.get_object_id("id")) {
                older.push(cursor::at_or_older(*sent, MessageId(id), "id"));
            }
        }
    }
    if let Some(cutoff) = retention.cutoff() {
        older.push(doc! { "sent": { "$lt": cutoff } });
    }
    Ok(older)
}

/// Applies `mark` to every message from `sender` in `owner`'s inbox (one `update_many`, retried:
/// a mark applied twice is applied once): how muting and blocking reach what was delivered.
pub(super) async fn mark_sender(
    backend: &Backend,
    collection: &Collection<Document>,
    layout: Layout,
    owner: &str,
    sender: &str,
    mark: Document,
) -> Result<()> {
    let filter = doc! { layout.owner_field: owner, "from": sender };
    backend
        .command("mark sender", || {
            collection.update_many(filter.clone(), mark.clone())
        })
        .await
        .map(drop)
}
