//! Follows, unfollows and memberships: the relations, and the subscriptions they change.

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use super::{group_key, owner_key, FollowGraph, Kind, Origin};
use crate::backend::lease_lock::Lease;
use crate::error::Result;
use crate::notifications::{Activity, Kind as NotificationKind};
use crate::observe::spans::Op;

/// Members or followers read per query while fanning a change out over a group.
const SCAN_PAGE: i64 = 500;

/// What a direct follow of `user` by `owner` tells the notifier: `user` is followed.
fn follow_activity(owner: &str, user: &str) -> Activity {
    Activity::new(user, NotificationKind::Follow, user, owner)
}

/// A change of a group's relations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupChange {
    /// A user follows the group.
    Follow,
    /// A user unfollows the group.
    Unfollow,
    /// A user joins the group.
    Join,
    /// A user leaves the group.
    Leave,
}

impl GroupChange {
    /// The public operation that makes this change, for its span.
    fn op(self) -> Op {
        match self {
            GroupChange::Follow => Op::GraphFollowGroup,
            GroupChange::Unfollow => Op::GraphUnfollowGroup,
            GroupChange::Join => Op::GraphAddMember,
            GroupChange::Leave => Op::GraphRemoveMember,
        }
    }
}

impl FollowGraph {
    /// `owner` follows `user` directly. Returns whether the relation is new; following again
    /// changes nothing (and completes a follow that failed half-way, counts included).
    ///
    /// # Errors
    ///
    /// [`Invalid::SelfAction`](crate::error::Invalid::SelfAction), [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"owner"`, `"user"`) for one over
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), [`Error::NotFound`](crate::Error::NotFound) for a user not registered, [`Forbidden::Blocked`](crate::error::Forbidden::Blocked) if either blocked the other
    /// ([`FollowGraph::block`]), all before anything is written.
    pub async fn follow(&self, owner: &str, user: &str) -> Result<bool> {
        let follow = move || async move {
            self.backend.ensure_indexes().await?;
            // The relation and its subscription change together under the owner's lock, so a
            // follow and an unfollow of the same pair cannot leave them disagreeing.
            let new = self
                .owner_locks
                .with_lock(&owner_key(owner), async {
                    // Under the lock a block's removal of this follow also takes: a block recorded
                    // before this check refuses the follow, one recorded after it removes it.
                    self.refuse_blocked(owner, user).await?;
                    self.change_direct(owner, user, true).await
                })
                .await?;
            // On every call, new or repeated: the notification is idempotent, so repeating a
            // follow whose notification was lost completes it. Queued, never failing the follow.
            if let Some(outbox) = &self.outbox {
                outbox.notify(follow_activity(owner, user)).await;
            }
            Ok(new)
        };
        self.for_pair(Op::GraphFollow, owner, user, "follow", follow)
            .await
    }

    /// `owner` stops following `user` directly; a subscription through a group stays. Returns
    /// whether there was a direct relation.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow`].
    pub async fn unfollow(&self, owner: &str, user: &str) -> Result<bool> {
        let unfollow = move || async move {
            self.backend.ensure_indexes().await?;
            self.remove_direct(owner, user).await
        };
        self.for_pair(Op::GraphUnfollow, owner, user, "follow", unfollow)
            .await
    }

    /// Removes `owner`'s direct follow of `user` (relation, direct origin, counts, and the
    /// notification), whether or not there was one; whether there was.
    pub(super) async fn remove_direct(&self, owner: &str, user: &str) -> Result<bool> {
        let existed = self
            .owner_locks
            .with_lock(&owner_key(owner), self.change_direct(owner, user, false))
            .await?;
        // On every call, as a follow notifies: a repeat completes a withdrawal that failed.
        if let Some(outbox) = &self.outbox {
            outbox.withdraw(follow_activity(owner, user)).await;
        }
        Ok(existed)
    }

    /// Records (`follows`) or deletes `owner`'s direct relation to `user`, and adds or removes
    /// the direct origin of `owner`'s subscription to `user` with the counts; whether the
    /// relation changed. The caller holds `owner`'s lock.
    async fn change_direct(&self, owner: &str, user: &str, follows: bool) -> Result<bool> {
        let changed = if follows {
            self.relate(owner, Kind::User, user).await?
        } else {
            self.unrelate(owner, Kind::User, user).await?
        };
        let owners = vec![owner.to_owned()];
        self.change_round(owners, &[user.to_owned()], &Origin::Direct, follows)
            .await?;
        Ok(changed)
    }

    /// `owner` follows `group`, and so every member, now and later (but not itself). Following a
    /// group with no members is allowed: it subscribes to nobody until members are added.
    /// Returns whether the relation is new.
    ///
    /// # Errors
    ///
    /// [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank user id or group id,
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for one over
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) (`"owner"` or, adding and removing members,
    /// `"user"`; `"group id"`), both before any command;
    /// [`Error::NotFound`](crate::Error::NotFound) for an unregistered user or group.
    pub async fn follow_group(&self, owner: &str, group: &str) -> Result<bool> {
        self.change_group(group, owner, GroupChange::Follow).await
    }

    /// `owner` stops following `group`; subscriptions with another route stay. Returns whether
    /// there was a relation.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow_group`].
    pub async fn unfollow_group(&self, owner: &str, group: &str) -> Result<bool> {
        self.change_group(group, owner, GroupChange::Unfollow).await
    }

    /// Adds `user` to `group`: every follower of the group now follows `user` too. Returns
    /// whether the membership is new.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow_group`].
    pub async fn add_member(&self, group: &str, user: &str) -> Result<bool> {
        self.change_group(group, user, GroupChange::Join).await
    }

    /// Removes `user` from `group`: the group's followers stop following `user` unless they
    /// have another route. Returns whether `user` was a member.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::follow_group`].
    pub async fn remove_member(&self, group: &str, user: &str) -> Result<bool> {
        self.change_group(group, user, GroupChange::Leave).await
    }

    /// Records `change` of `user` and `group`, then adds or removes the group's origin on every
    /// subscription it concerns: `user`'s to each member (follow, unfollow), or each follower's
    /// to `user` (join, leave). Holds the group's lock, renewed before each page of 500. Runs in
    /// the change's span.
    async fn change_group(&self, group: &str, user: &str, change: GroupChange) -> Result<bool> {
        change
            .op()
            .span()
            .run(async move {
                // The user follows the group, or is a member of it.
                let role = match change {
                    GroupChange::Follow | GroupChange::Unfollow => "owner",
                    GroupChange::Join | GroupChange::Leave => "user",
                };
                self.check_user_and_group(role, user, group).await?;
                self.backend.ensure_indexes().await?;
                let origin = Origin::Group(group.to_owned());
                let add = matches!(change, GroupChange::Follow | GroupChange::Join);
                self.group_locks
                    .with_lease(&group_key(group), |lease| async move {
                        let changed = match change {
                            GroupChange::Follow => self.relate(user, Kind::Group, group).await?,
                            GroupChange::Unfollow => {
                                self.unrelate(user, Kind::Group, group).await?
                            }
                            GroupChange::Join => {
                                let since = bson::DateTime::now();
                                let member = doc! { "group": group, "user": user, "since": since };
                                self.backend.insert_once(&self.members, member).await?
                            }
                            GroupChange::Leave => {
                                let member = doc! { "group": group, "user": user };
                                self.delete_one(&self.members, member).await?
                            }
                        };
                        let (one, origin) = (&[user.to_owned()], &origin);
                        let by_members =
                            matches!(change, GroupChange::Follow | GroupChange::Unfollow);
                        let (collection, filter, field) = if by_members {
                            (&self.members, doc! { "group": group }, "user")
                        } else {
                            (&self.follows, self.group_followers(group), "owner")
                        };
                        self.each_page(
                            collection,
                            filter,
                            field,
                            Some(&lease),
                            |others| async move {
                                if by_members {
                                    self.change_origin(one, &others, origin, add).await
                                } else {
                                    self.change_origin(&others, one, origin, add).await
                                }
                            },
                        )
                        .await?;
                        Ok(changed)
                    })
                    .await
            })
            .await
    }

    /// Records that `owner` follows `target`; whether the record is new.
    async fn relate(&self, owner: &str, kind: Kind, target: &str) -> Result<bool> {
        self.backend
            .insert_once(
                &self.follows,
                doc! {
                    "owner": owner, "kind": kind.as_str(), "target": target,
                    "since": bson::DateTime::now(),
                },
            )
            .await
    }

    /// Deletes the record that `owner` follows `target`; whether there was one.
    async fn unrelate(&self, owner: &str, kind: Kind, target: &str) -> Result<bool> {
        let relation = doc! { "owner": owner, "kind": kind.as_str(), "target": target };
        self.delete_one(&self.follows, relation).await
    }

    /// Deletes the document matching `filter`, retrying transient failures (deleting twice
    /// deletes once); whether this call saw one deleted. When an attempt deleted it but its reply
    /// was lost, the retry finds nothing and the answer is `false`: the document is gone either
    /// way.
    pub(super) async fn delete_one(
        &self,
        collection: &Collection<Document>,
        filter: Document,
    ) -> Result<bool> {
        let deleted = self
            .backend
            .command("delete", || collection.delete_one(filter.clone()))
            .await?;
        Ok(deleted.deleted_count > 0)
    }

    fn group_followers(&self, group: &str) -> Document {
        doc! { "kind": Kind::Group.as_str(), "target": group }
    }

    /// Calls `work` with each page of `field` values of the documents matching `filter`, in
    /// `field` order, renewing `lease` (if any) before each page.
    pub(super) async fn each_page<F, Fut>(
        &self,
        collection: &Collection<Document>,
        filter: Document,
        field: &str,
        lease: Option<&Lease>,
        mut work: F,
    ) -> Result<()>
    where
        F: FnMut(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let mut after: Option<String> = None;
        loop {
            if let Some(lease) = lease {
                lease.renew().await?;
            }
            let mut query = filter.clone();
            if let Some(after) = &after {
                query.insert(field, doc! { "$gt": after });
            }
            let documents: Vec<Document> = collection
                .find(query)
                .projection(doc! { field: 1 })
                .sort(doc! { field: 1 })
                .limit(SCAN_PAGE)
                .await?
                .try_collect()
                .await?;
            let ids: Vec<String> = documents
                .iter()
                .filter_map(|d| d.get_str(field).ok().map(str::to_owned))
                .collect();
            let Some(last) = ids.last().cloned() else {
                return Ok(());
            };
            let full = ids.len() as i64 == SCAN_PAGE;
            work(ids).await?;
            if !full {
                return Ok(());
            }
            after = Some(last);
        }
    }
}
