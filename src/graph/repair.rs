//! Rebuilds and recounts: repairs of what the operations keep on their own.

use bson::doc;

use super::checks::for_user;
use super::{owner_key, subscriptions, FollowGraph, RebuildReport, UserStats};
use crate::observe::spans::Op;
use crate::Result;

impl FollowGraph {
    /// Recomputes `owner`'s subscriptions from the direct relations (the users and groups it
    /// follows, and the groups' members), fixing any that disagree, and the counts with them.
    ///
    /// This replaces the seed's per-user map-reduce, deprecated in MongoDB: the relations are
    /// read with indexed queries, the difference is computed here, and only subscriptions that
    /// differ are written, under the owner's lock.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`](crate::Error::NotFound) for an unregistered user.
    pub async fn rebuild(&self, owner: &str) -> Result<RebuildReport> {
        let rebuild = move || async move {
            self.prepare_repair(owner).await?;
            self.owner_locks
                .with_lock(&owner_key(owner), self.rebuild_locked(owner))
                .await
        };
        for_user(Op::GraphRebuild, "owner", owner, rebuild).await
    }

    /// Sets `user`'s counts from the subscriptions that exist: `following` exactly (under the
    /// user's lock), `followers` from a count of the `{user, owner}` index range.
    ///
    /// Counts are kept exact by every operation, and one interrupted between its subscription
    /// write and its count update is completed by calling it again (see the
    /// [module docs](super)). This is the repair for counts that went wrong by other means (a
    /// stats document edited by hand, a repeat that came after more than 100 other changes of
    /// the same user's counts). It first finishes the changes left pending on `user`'s
    /// subscriptions, either way, under their owners' locks. The `followers` it sets is exact
    /// when no one follows or unfollows `user` meanwhile (on MongoDB, `followers` changes without
    /// a lock on `user`); run it when that is quiet.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`](crate::Error::NotFound) for an unregistered user.
    pub async fn recount(&self, user: &str) -> Result<UserStats> {
        let recount = move || async move {
            self.prepare_repair(user).await?;
            // Changes left pending on `user`'s subscriptions are finished first: afterwards they
            // would move the counts set here.
            self.finish_pending_to(user).await?;
            let followers = self
                .subscriptions
                .count_documents(doc! { "user": user })
                .await?;
            self.set_count(user, subscriptions::Count::Followers, followers as i64)
                .await?;
            self.owner_locks
                .with_lock(&owner_key(user), async {
                    self.finish_pending(&doc! { "owner": user }).await?;
                    let following = self
                        .subscriptions
                        .count_documents(doc! { "owner": user })
                        .await?;
                    self.set_count(user, subscriptions::Count::Following, following as i64)
                        .await
                })
                .await?;
            self.stats(user).await
        };
        for_user(Op::GraphRecount, "user", user, recount).await
    }

    /// What a repair of `user` checks first: that the user is registered, and that the
    /// graph's indexes exist (the repair writes through the unique ones).
    async fn prepare_repair(&self, user: &str) -> Result<()> {
        self.check_users(&[user]).await?;
        self.backend.ensure_indexes().await
    }
}
