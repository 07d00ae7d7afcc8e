//! The lifecycle of a time-ordered inbox ([`crate::FanOutOnRead`], [`crate::FanOutOnWrite`]),
//! written once over its [`Layout`]: [`LifecycleEngine`] for every [`TimeOrderedStore`].
//!
//! The two layouts differ in where an owner's copy of a message lives (a document its
//! recipients share, or one of the owner's own) and so in how its state is marked
//! ([`OwnerState::mark`](super::OwnerState::mark)) and how a write takes turns where updates
//! are not atomic; a store says that much, and what only it does (delete, mute and block,
//! prune), and the rest is here.
//! One `update` per change of one owner's state of one message, one `update_many` per range
//! or per message, one `count` per count. Every write sets, unsets, adds to a set or pulls:
//! applied twice, it applies once, so a retry after a lost reply changes nothing more.

use async_trait::async_trait;
use bson::{doc, Document};
use mongodb::Collection;

use super::{Layout, Mark};
use crate::backend::Backend;
use crate::error::Result;
use crate::inbox::cursor;
use crate::inbox::engine::{InboxEngine, LifecycleEngine};
use crate::inbox::filters::Filter;
use crate::inbox::lifecycle::{message_not_found, not_sender};
use crate::inbox::retention::Retention;
use crate::inbox::up_to::UpTo;
use crate::inbox::validate;
use crate::inbox::{MessageId, Payload};
use crate::validate::MAX_DOCUMENT_BYTES;

/// A store whose documents each hold one message, ordered by `(sent, id)`: where its documents
/// are, how it finds and writes an owner's, and the lifecycle writes only it knows how to do.
/// Methods share their names with the [`LifecycleEngine`] methods they serve.
#[async_trait]
pub(in crate::inbox) trait TimeOrderedStore: Send + Sync {
    /// Where its documents keep owners, ids and state.
    const LAYOUT: Layout;

    /// The store's backend.
    fn backend(&self) -> &Backend;

    /// The collection of its documents.
    fn documents(&self) -> &Collection<Document>;

    /// The retention it prunes to.
    fn retention(&self) -> Retention;

    /// The filter of `owner`'s document of message `id`, found by `_id`, the one index every
    /// server uses.
    fn document_of(owner: &str, id: MessageId) -> Document;

    /// [`document_of`](Self::document_of) while it is in `owner`'s inbox (not deleted by them,
    /// not retracted).
    fn held(owner: &str, id: MessageId) -> Document {
        let mut filter = Self::document_of(owner, id);
        filter.extend(Self::LAYOUT.state.kept(owner));
        filter
    }

    /// The filter of every document of message `id`.
    fn documents_of(id: MessageId) -> Document;

    /// [`documents_of`](Self::documents_of) that are not retracted (nor, for copies, deleted).
    fn live_documents_of(id: MessageId) -> Document {
        let mut filter = Self::documents_of(id);
        filter.extend(Self::LAYOUT.state.live());
        filter
    }

    /// The update retracting a document: its payload gone, a tombstone left.
    fn retraction() -> Document;

    /// Applies `update` to `owner`'s [`held`](Self::held) document of message `id`, retried,
    /// taking turns where updates are not atomic: one `update`. Returns how many matched (0
    /// or 1).
    async fn update_held(&self, owner: &str, id: MessageId, update: Document) -> Result<u64>;

    /// Applies `update` to every document of `owner`'s that `filter` matches, retried, taking
    /// turns where updates are not atomic. Returns how many matched.
    async fn update_owned(&self, owner: &str, filter: Document, update: Document) -> Result<u64>;

    /// Deletes message `id` from `owner`'s inbox ([`LifecycleEngine::delete`]).
    async fn delete(&self, owner: &str, id: MessageId) -> Result<()>;

    /// Mutes or blocks (or stops) `sender` for `owner`: their list, then what they hold from
    /// `sender` ([`LifecycleEngine::set_filter`]).
    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()>;

    /// Drops what `older` (the `$or` clauses of
    /// [`past_retention`](super::past_retention), not empty) selects of `owner`'s inbox.
    /// Returns how many messages left it.
    async fn drop_older(&self, owner: &str, older: Vec<Document>) -> Result<u64>;
}

/// A [`TimeOrderedStore`]'s [`LAYOUT`](TimeOrderedStore::LAYOUT) and the accessors of the
/// store's fields it reads: `backend`, `retention`, and the collection of its documents (named).
macro_rules! time_ordered_fields {
    ($layout:expr, $documents:ident) => {
        const LAYOUT: $crate::inbox::time_ordered::Layout = $layout;

        fn backend(&self) -> &$crate::backend::Backend {
            &self.backend
        }

        fn documents(&self) -> &mongodb::Collection<bson::Document> {
            &self.$documents
        }

        fn retention(&self) -> $crate::inbox::Retention {
            self.retention
        }
    };
}
pub(in crate::inbox) use time_ordered_fields;

/// `owner`'s [`TimeOrderedStore::held`] document of message `id` marked (`on`) or unmarked:
/// one `update`.
///
/// # Errors
///
/// [`crate::Error::NotFound`] when it is not in `owner`'s inbox (nothing written).
async fn mark_held<S: TimeOrderedStore>(
    store: &S,
    owner: &str,
    id: MessageId,
    mark: Mark,
    on: bool,
) -> Result<()> {
    let update = S::LAYOUT.state.mark(owner, mark, on);
    if store.update_held(owner, id, update).await? == 0 {
        return Err(message_not_found(id));
    }
    Ok(())
}

/// Applies `update` to every live document of message `id` from `sender`
/// ([`Backend::update_every_owner`]: one `update_many` where updates are atomic). Returns how
/// many matched.
async fn update_message<S: TimeOrderedStore>(
    store: &S,
    sender: &str,
    id: MessageId,
    update: Document,
) -> Result<u64> {
    let mut filter = S::live_documents_of(id);
    filter.insert("from", sender);
    store
        .backend()
        .update_every_owner(store.documents(), &filter, S::LAYOUT.lock_field(), &update)
        .await
}

/// Whether `user` may change message `id`: [`crate::Error::NotFound`] when no document of it
/// is stored, [`Forbidden::NotSender`](crate::error::Forbidden::NotSender) when someone else
/// sent it. One `find`.
async fn check_sender<S: TimeOrderedStore>(store: &S, user: &str, id: MessageId) -> Result<()> {
    let found = store
        .documents()
        .find_one(S::documents_of(id))
        .projection(doc! { "from": 1 })
        .await?
        .ok_or_else(|| message_not_found(id))?;
    if found.get_str("from") != Ok(user) {
        return Err(not_sender(user, id));
    }
    Ok(())
}

/// The `(sent, id)` up to which [`LifecycleEngine::mark_read_up_to`] marks: none for the
/// newest, the cursor's, or that of the message named (one `find` of `owner`'s document).
async fn read_point<S: TimeOrderedStore>(
    store: &S,
    owner: &str,
    up_to: UpTo,
) -> Result<Option<(bson::DateTime, MessageId)>> {
    Ok(match up_to {
        UpTo::Newest => None,
        UpTo::Cursor(after) => Some(cursor::time_key(&after, S::LAYOUT.strategy, owner)?),
        UpTo::Message(id) => {
            let found = store
                .documents()
                .find_one(S::held(owner, id))
                .projection(doc! { "sent": 1 })
                .await?
                .ok_or_else(|| message_not_found(id))?;
            let sent = found
                .get_datetime("sent")
                .map_err(|_| message_not_found(id))?;
            Some((*sent, id))
        }
    })
}

#[async_trait]
impl<P: Payload, S: TimeOrderedStore + InboxEngine<P>> LifecycleEngine<P> for S {
    async fn mark_read(&self, owner: &str, id: MessageId) -> Result<()> {
        mark_held(self, owner, id, Mark::Read, true).await
    }

    async fn mark_unread(&self, owner: &str, id: MessageId) -> Result<()> {
        mark_held(self, owner, id, Mark::Read, false).await
    }

    async fn set_starred(&self, owner: &str, id: MessageId, starred: bool) -> Result<()> {
        mark_held(self, owner, id, Mark::Starred, starred).await
    }

    /// One `update_many` over the owner's shown unread documents at or below the point; a
    /// [`UpTo::Message`] first reads that document's `(sent, id)` (one `find`).
    async fn mark_read_up_to(&self, owner: &str, up_to: UpTo) -> Result<()> {
        let point = read_point(self, owner, up_to).await?;
        let state = S::LAYOUT.state;
        let mut filter = doc! { S::LAYOUT.owner_field: owner };
        filter.extend(state.unread(owner));
        filter.extend(state.visible(owner));
        if let Some((sent, id)) = point {
            filter.extend(cursor::at_or_older(sent, id, "id"));
        }
        let read = state.mark(owner, Mark::Read, true);
        self.update_owned(owner, filter, read).await?;
        Ok(())
    }

    async fn unread_count(&self, owner: &str, cap: Option<u64>) -> Result<u64> {
        super::unread_count(self.backend(), self.documents(), S::LAYOUT, owner, cap).await
    }

    async fn delete(&self, owner: &str, id: MessageId) -> Result<()> {
        TimeOrderedStore::delete(self, owner, id).await
    }

    /// One `update_many` of the message's live documents; when it matches nothing (retracted
    /// before, or by a lost reply, or not the sender's), one `find` tells which.
    async fn retract(&self, sender: &str, id: MessageId) -> Result<()> {
        if update_message(self, sender, id, S::retraction()).await? == 0 {
            check_sender(self, sender, id).await?;
        }
        Ok(())
    }

    /// One `find` of a live document (the sender and the size check, before anything is
    /// written), then one `update_many`.
    async fn edit(&self, sender: &str, id: MessageId, payload: P) -> Result<bson::DateTime> {
        let limit = MAX_DOCUMENT_BYTES - S::LAYOUT.state.room_for_state();
        // The payload alone first, before any command; the message with it once read.
        let payload = bson::to_bson(&payload)?;
        validate::check_message_size(&payload, limit)?;
        let found = self
            .documents()
            .find_one(S::live_documents_of(id))
            .projection(doc! { "message": 0 })
            .await?;
        let Some(mut found) = found else {
            return Err(message_not_found(id));
        };
        if found.get_str("from") != Ok(sender) {
            return Err(not_sender(sender, id));
        }
        let edited = bson::DateTime::now();
        found.insert("message", payload.clone());
        found.insert("edited", edited);
        validate::check_message_size(&found, limit)?;
        let update = doc! { "$set": { "message": payload, "edited": edited } };
        if update_message(self, sender, id, update).await? == 0 {
            // Retracted since the `find`.
            return Err(message_not_found(id));
        }
        Ok(edited)
    }

    async fn set_filter(&self, owner: &str, sender: &str, filter: Filter, on: bool) -> Result<()> {
        TimeOrderedStore::set_filter(self, owner, sender, filter, on).await
    }

    fn retention(&self) -> Retention {
        TimeOrderedStore::retention(self)
    }

    /// One `find` of the newest document past the limit (with `keep_newest`), then what the
    /// store's [`TimeOrderedStore::drop_older`] sends, if anything is past it.
    async fn prune(&self, owner: &str) -> Result<u64> {
        let retention = TimeOrderedStore::retention(self);
        let older = super::past_retention(self.documents(), S::LAYOUT, owner, &retention).await?;
        if older.is_empty() {
            return Ok(0);
        }
        self.drop_older(owner, older).await
    }
}
