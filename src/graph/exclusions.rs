//! Users a user dismissed from their recommendations or blocked: one document
//! `{owner, user, kind: "dismiss" | "block", since}` each, in `graph_exclusions`, under a unique
//! `{owner, kind, user}` index (recording twice records once).
//!
//! # Blocks
//!
//! A block is recorded, then removes the direct follows between the two users in both
//! directions, each under its follower's lock, as an unfollow does (counts, notification
//! withdrawn). While it stands, a direct follow either way is refused with [`Forbidden::Blocked`](crate::error::Forbidden::Blocked):
//! [`FollowGraph::follow`] looks for a block under the follower's lock, after taking it. So a
//! follow racing a block either sees the block and is refused, or ends before the block takes
//! that lock, and the block then removes it; no direct follow survives a block.
//!
//! Subscriptions through groups are not touched: they belong to the group, and are recomputed
//! from the group's relations by [`FollowGraph::rebuild`]. A user who follows a group keeps
//! following its members, a blocked one included. Recommendations leave out blocked users both
//! ways: whom the user blocked, and who blocked the user.
//!
//! Lifting a block ([`FollowGraph::unblock`]) restores no follow. A dismissal is never lifted.

use crate::error::Forbidden;
use std::collections::BTreeSet;

use bson::{doc, Document};
use futures::TryStreamExt;

use super::checks::for_user;
use super::paging::{user_page, List};
use super::FollowGraph;
use crate::observe::spans::Op;
use crate::{Error, Page, PageRequest, Result};

/// `kind` of a dismissal.
const DISMISS: &str = "dismiss";
/// `kind` of a block.
const BLOCK: &str = "block";

impl FollowGraph {
    /// `owner` dismisses `user` from their recommendations, for good. Returns whether the
    /// dismissal is new; dismissing again changes nothing.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"owner"`, `"user"`) for one over
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES),
    /// [`Invalid::SelfAction`](crate::error::Invalid::SelfAction) for `owner == user`,
    /// [`Error::NotFound`] for a user not registered, all before anything is written.
    pub async fn dismiss(&self, owner: &str, user: &str) -> Result<bool> {
        let dismiss = move || async move {
            self.backend.ensure_indexes().await?;
            self.exclude(owner, user, DISMISS).await
        };
        self.for_pair(Op::GraphDismiss, owner, user, "dismiss", dismiss)
            .await
    }

    /// `owner` blocks `user`: records it, removes the direct follows between them both ways
    /// (each as an unfollow does, counts and notification included), and refuses new ones
    /// either way with [`Forbidden::Blocked`] until [`FollowGraph::unblock`]; neither is recommended
    /// to the other. Returns whether the block is new; blocking again changes nothing, and
    /// completes a block that failed half-way.
    ///
    /// A follow looks for a block holding the follower's lock, and the block removes that
    /// follow under the same lock after recording itself: a follow racing a block is either
    /// refused or removed, never left standing. Routes through groups are left alone: they
    /// belong to the group (a user who follows a group keeps following its members, a blocked
    /// one included, and [`FollowGraph::rebuild`] recomputes them from the group's relations).
    ///
    /// Costs: 1 `find` (both users exist), 1 `insert` (the block), then for each direction 4
    /// commands where there was no follow (lock `insert`, relation `delete`, subscription
    /// `find`, lock `delete`) and 7 on MongoDB where there was one (as an unfollow after its
    /// check); a notifier adds a withdrawal each way.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::dismiss`].
    pub async fn block(&self, owner: &str, user: &str) -> Result<bool> {
        let block = move || async move {
            self.backend.ensure_indexes().await?;
            // Recorded before the follows are removed: a follow that takes the follower's lock
            // after the removal below sees the block and is refused.
            let new = self.exclude(owner, user, BLOCK).await?;
            // On every call, new or repeated: a repeat completes a removal that failed.
            self.remove_direct(owner, user).await?;
            self.remove_direct(user, owner).await?;
            Ok(new)
        };
        self.for_pair(Op::GraphBlock, owner, user, "block", block)
            .await
    }

    /// `owner` lifts their block of `user`: direct follows between them are allowed again (none
    /// is restored). Returns whether there was a block.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::dismiss`].
    pub async fn unblock(&self, owner: &str, user: &str) -> Result<bool> {
        let block = doc! { "owner": owner, "kind": BLOCK, "user": user };
        // Deleting twice deletes once: a retry or a repeat is harmless.
        let unblock = move || self.delete_one(&self.exclusions, block);
        self.for_pair(Op::GraphUnblock, owner, user, "block", unblock)
            .await
    }

    /// Whom `owner` blocked, by user id: one page of the `{owner, kind, user}` index.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank),
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor),
    /// [`Invalid::PageLimit`](crate::error::Invalid::PageLimit).
    pub async fn blocked(&self, owner: &str, page: PageRequest) -> Result<Page<String>> {
        let filter = doc! { "owner": owner, "kind": BLOCK };
        let read = move || async move {
            user_page(&self.exclusions, filter, List::Blocked(owner), &page).await
        };
        for_user(Op::GraphBlocked, "owner", owner, read).await
    }

    /// Fails with [`Forbidden::Blocked`](crate::error::Forbidden::Blocked) if either of `owner` and `user` blocked the other (one
    /// `find`). A follow calls it holding `owner`'s lock.
    pub(super) async fn refuse_blocked(&self, owner: &str, user: &str) -> Result<()> {
        let either = doc! { "$or": [
            { "owner": owner, "kind": BLOCK, "user": user },
            { "owner": user, "kind": BLOCK, "user": owner },
        ] };
        let found = self
            .exclusions
            .find_one(either)
            .projection(doc! { "owner": 1, "user": 1 })
            .await?;
        match found {
            Some(block) => Err(Error::Forbidden {
                reason: Forbidden::Blocked {
                    by: block.get_str("owner").unwrap_or(owner).to_owned(),
                    blocked: block.get_str("user").unwrap_or(user).to_owned(),
                },
            }),
            None => Ok(()),
        }
    }

    /// Which of `candidates` are left out of `owner`'s recommendations: dismissed or blocked by
    /// `owner`, or blocking `owner` (one `find`).
    pub(super) async fn excluded(
        &self,
        owner: &str,
        candidates: &[String],
    ) -> Result<BTreeSet<String>> {
        let filter = doc! { "$or": [
            { "owner": owner, "user": { "$in": candidates } },
            { "user": owner, "kind": BLOCK, "owner": { "$in": candidates } },
        ] };
        let found: Vec<Document> = self
            .exclusions
            .find(filter)
            .projection(doc! { "_id": 0, "owner": 1, "user": 1 })
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| {
                let (by, of) = (d.get_str("owner").ok()?, d.get_str("user").ok()?);
                Some(if by == owner { of } else { by }.to_owned())
            })
            .collect())
    }

    /// Records that `owner` excluded `user` as `kind`; whether the record is new.
    async fn exclude(&self, owner: &str, user: &str, kind: &str) -> Result<bool> {
        let record = doc! {
            "owner": owner, "kind": kind, "user": user, "since": bson::DateTime::now(),
        };
        // A unique `{owner, kind, user}`: a retry or a repeat meets the stored record.
        self.backend.insert_once(&self.exclusions, record).await
    }
}
