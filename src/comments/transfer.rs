//! Moving discussions between comment stores: what a migration from one strategy to another
//! ([`crate::migrate`]) needs of each, in a form no strategy owns.
//!
//! [`CommentTransfer`] lists a store's discussions, exports one discussion as [`HeldComment`]s
//! (every comment, tombstones included, with its votes and every user's vote), imports such an
//! export into another store (replacing what that store held of the discussion, so an import
//! repeated or cut off part way and run again leaves each comment once), and removes a
//! discussion (or every one) again. Every strategy implements it.
//!
//! # Order and links
//!
//! An export lists a discussion's comments by posting time (the chronological view's order,
//! oldest first), except that a reply never comes before its parent: an import builds the
//! discussion in that order, each sibling after the ones before it, so the chronological and
//! the threaded views read as in the source. Ties of posting time keep the source's order.
//!
//! Links are each strategy's own (a slug path, a position path, a slug). An import keeps a
//! comment's link where it is one of the target's own kind (a store of the same strategy),
//! and otherwise gives it a new one; it returns the link each comment got, in the export's
//! order, for the caller's link map ([`crate::migrate::CommentMigration`] keeps one).
//!
//! Idempotency keys ([`NewComment::with_key`](super::NewComment::with_key)) do not travel:
//! a key is derived into each strategy's own ids, so a repeat of a post made before the move
//! posts again. Posting and edit times, authors, texts, tombstones, counts and votes do.

use std::future::Future;

use async_trait::async_trait;
use bson::Document;
use futures::stream::BoxStream;
use mongodb::Collection;

use super::engine::TransferEngine;
use super::model::HeldComment;
use super::traits::span;
use super::votes::{Tally, VoteBook};
use super::{CommentStore, Vote, VotedComments};
use crate::backend::Backend;
use crate::Result;

/// What moving discussions between stores needs of a comment store; every strategy implements
/// it. See the [module docs](self) and [`crate::migrate`].
#[async_trait]
pub trait CommentTransfer: CommentStore {
    /// The strategy's transfer engine: what this trait's operations call once their input is
    /// checked. Hidden and unnameable outside the crate, so the trait is sealed: only the crate's
    /// strategies (and its migration's stores) are comment stores, and new operations can be added
    /// to it without breaking any application.
    #[doc(hidden)]
    fn transfer_engine(&self) -> &dyn TransferEngine;

    /// Every discussion holding at least one comment (a tombstone included) whose id sorts after
    /// `after`, in order of id.
    async fn discussions(&self, after: Option<String>) -> Result<BoxStream<'_, Result<String>>> {
        span!(self, "discussions")
            .run(self.transfer_engine().discussions(after))
            .await
    }

    /// Every comment of `discussion` in the order of the [module docs](self) (votes a failure
    /// left half counted finished first). Read whole: a discussion is moved in one piece.
    async fn export(&self, discussion: &str) -> Result<Vec<HeldComment>> {
        span!(self, "export")
            .run(self.transfer_engine().export(discussion))
            .await
    }

    /// Makes `discussion` in this store hold `comments` (an export, in its order) and nothing
    /// else, with their votes; returns the link each comment got here, in the same order.
    /// Repeating it (after a lost reply, or a failure part way) leaves each comment once.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Unsupported`] for a reply where this strategy does not thread, before
    /// anything is written; a comment or discussion too large for this store as its writes
    /// refuse them.
    async fn import(&self, discussion: &str, comments: &[HeldComment]) -> Result<Vec<String>> {
        span!(self, "import", items = comments.len())
            .run(self.transfer_engine().import(discussion, comments))
            .await
    }

    /// Removes `discussion`'s comments and their votes from this store.
    async fn purge(&self, discussion: &str) -> Result<()> {
        span!(self, "purge")
            .run(self.transfer_engine().purge(discussion))
            .await
    }

    /// Removes every comment and vote from this store.
    async fn purge_all(&self) -> Result<()> {
        span!(self, "purge_all")
            .run(self.transfer_engine().purge_all())
            .await
    }

    /// Whether this store holds no comment at all.
    async fn is_empty(&self) -> Result<bool> {
        self.transfer_engine().is_empty().await
    }

    /// A discussion holding a reply (one command): among `within`, or any. What a move into a
    /// strategy without threads refuses.
    async fn threaded_discussion(&self, within: Option<&[String]>) -> Result<Option<String>> {
        self.transfer_engine().threaded_discussion(within).await
    }

    /// The collections the store keeps comments and votes in (not its locks): two stores of a
    /// migration must not share one.
    fn data_collections(&self) -> Vec<String> {
        self.transfer_engine().data_collections()
    }
}

/// Every transfer engine is [`CommentTransfer`].
impl<E: TransferEngine> CommentTransfer for E {
    fn transfer_engine(&self) -> &dyn TransferEngine {
        self
    }
}

/// A transfer-capable comment store of any strategy, for `Arc<DynCommentTransfer>`.
pub type DynCommentTransfer = dyn CommentTransfer;

/// Puts `comments` (in posting order, ties in the store's own order) in export order: a reply
/// whose parent comes after it is moved to just after that parent.
pub(super) fn parents_first(comments: Vec<HeldComment>) -> Vec<HeldComment> {
    use std::collections::{HashMap, HashSet};
    let mut out = Vec::with_capacity(comments.len());
    let mut placed: HashSet<String> = HashSet::new();
    // Replies waiting for their parent, by parent link.
    let mut waiting: HashMap<String, Vec<HeldComment>> = HashMap::new();
    let present: HashSet<String> = comments.iter().map(|c| c.link.clone()).collect();
    fn place(
        comment: HeldComment,
        out: &mut Vec<HeldComment>,
        placed: &mut HashSet<String>,
        waiting: &mut HashMap<String, Vec<HeldComment>>,
    ) {
        let link = comment.link.clone();
        out.push(comment);
        placed.insert(link.clone());
        for reply in waiting.remove(&link).unwrap_or_default() {
            place(reply, out, placed, waiting);
        }
    }
    for comment in comments {
        match &comment.parent {
            Some(parent) if present.contains(parent) && !placed.contains(parent) => {
                waiting.entry(parent.clone()).or_default().push(comment);
            }
            _ => place(comment, &mut out, &mut placed, &mut waiting),
        }
    }
    out
}

/// Refuses `comments` holding a reply, for a store without threads.
pub(super) fn refuse_replies(discussion: &str, comments: &[HeldComment]) -> Result<()> {
    if comments.iter().any(|c| c.parent.is_some()) {
        return Err(threads_unsupported(discussion));
    }
    Ok(())
}

/// [`crate::Error::Unsupported`] for a discussion with replies moved into a strategy without
/// threads.
pub(crate) fn threads_unsupported(discussion: &str) -> crate::Error {
    crate::Error::Unsupported {
        feature: "replies",
        limit: crate::error::Limit::Strategy,
        reason: format!(
            "the discussion {discussion} has replies, and the target strategy has no threads \
             to move them into"
        ),
    }
}

/// The `_id`s (strings) of `collection`'s documents matching `filter` that sort after `after`,
/// in order: one `find`, read in batches.
pub(super) async fn ids_after<'a>(
    collection: &'a mongodb::Collection<bson::Document>,
    mut filter: bson::Document,
    after: Option<String>,
) -> Result<BoxStream<'a, Result<String>>> {
    use futures::{StreamExt, TryStreamExt};
    if let Some(after) = after {
        filter.insert("_id", bson::doc! { "$gt": after });
    }
    let cursor = collection
        .find(filter)
        .projection(bson::doc! { "_id": 1 })
        .sort(bson::doc! { "_id": 1 })
        .await?;
    Ok(cursor
        .map_err(crate::Error::from)
        .try_filter_map(|found| async move { Ok(found.get_str("_id").ok().map(str::to_owned)) })
        .boxed())
}

/// The end of every strategy's import: the votes of `comments` (exported) written under the
/// links `links` they got ([`super::votes::VoteBook::import`]); returns `links`.
pub(super) async fn import_votes<S: Tally>(
    store: &S,
    discussion: &str,
    comments: &[HeldComment],
    links: Vec<String>,
) -> Result<Vec<String>> {
    let votes: Vec<(String, String, Vote)> = comments
        .iter()
        .zip(&links)
        .flat_map(|(comment, link)| {
            comment
                .voters
                .iter()
                .map(move |(user, vote)| (link.clone(), user.clone(), *vote))
        })
        .collect();
    store.vote_book().import(discussion, &votes).await?;
    Ok(links)
}

/// Removes every document of `collections` (the store's own), then every vote of `store`.
pub(super) async fn purge_all<S: Tally>(
    store: &S,
    backend: &Backend,
    collections: &[&Collection<Document>],
) -> Result<()> {
    crate::inbox::transfer::delete_all(backend, collections).await?;
    purge_votes(store.vote_book(), None).await
}

/// Deletes every vote of `discussion` (or of every discussion) from `votes`: one `delete`.
pub(super) async fn purge_votes(votes: &VoteBook, discussion: Option<&str>) -> Result<()> {
    delete_discussion(
        votes.backend(),
        votes.collection(),
        "discussion_id",
        discussion,
        "purge votes",
    )
    .await
}

/// Deletes the documents of `discussion` in `collection` (those whose `field` names it), or
/// every document for `None`: one `delete`, retried (deleting twice deletes once).
pub(crate) async fn delete_discussion(
    backend: &Backend,
    collection: &Collection<Document>,
    field: &str,
    discussion: Option<&str>,
    operation: &'static str,
) -> Result<()> {
    let filter = match discussion {
        Some(discussion) => bson::doc! { field: discussion },
        None => bson::doc! {},
    };
    backend
        .command(operation, || collection.delete_many(filter.clone()))
        .await
        .map(drop)
}

/// The names of `collections` (the store's own) and of `store`'s votes collection.
pub(super) fn data_collections<S: Tally>(
    store: &S,
    collections: &[&Collection<Document>],
) -> Vec<String> {
    collections
        .iter()
        .map(|collection| collection.name())
        .chain([store.vote_book().collection().name()])
        .map(str::to_owned)
        .collect()
}

/// An export of `store`'s `discussion`, written once for every strategy: its pending votes
/// settled first, then its comments as `read` lists them (in posting order) with every user's
/// vote (one `find` of the votes), parents first.
pub(super) async fn export_with<S>(
    store: &S,
    discussion: &str,
    read: impl Future<Output = Result<Vec<HeldComment>>>,
) -> Result<Vec<HeldComment>>
where
    S: Tally + VotedComments,
{
    VotedComments::settle_votes(store, discussion).await?;
    let mut comments = read.await?;
    let mut votes = store.vote_book().all(discussion).await?;
    for comment in &mut comments {
        comment.voters = votes.remove(&comment.link).unwrap_or_default();
    }
    Ok(parents_first(comments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comments::model::Author;
    use crate::comments::ranking::Votes;

    fn held(link: &str, parent: Option<&str>) -> HeldComment {
        HeldComment {
            link: link.into(),
            parent: parent.map(str::to_owned),
            author: Author::new("u", "U"),
            text: "t".into(),
            posted: bson::DateTime::from_millis(0),
            edited: None,
            deleted: false,
            votes: Votes::default(),
            voters: Vec::new(),
        }
    }

    #[test]
    fn replies_follow_their_parents() {
        let order = parents_first(vec![
            held("a", None),
            held("c", Some("b")),
            held("d", Some("c")),
            held("b", None),
            held("e", None),
        ]);
        let links: Vec<&str> = order.iter().map(|c| c.link.as_str()).collect();
        assert_eq!(links, ["a", "b", "c", "d", "e"]);
    }
}
