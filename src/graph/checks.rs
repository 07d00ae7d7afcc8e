//! The input checks of the graph's operations: ids, and that users and groups exist.

use std::collections::BTreeSet;
use std::future::Future;

use bson::{doc, Document};
use futures::TryStreamExt;

use super::FollowGraph;
use crate::observe::spans::Op;
use crate::validate;
use crate::{error::Entity, Error, Result};

/// Runs `work` on `user`'s part of the graph (`role` in errors) in `op`'s span once the id is
/// checked: a blank or over-long id fails there, before any command. `work` is called only
/// then, so the operation's future holds the check's state or the work's, never both.
pub(super) async fn for_user<T, Fut>(
    op: Op,
    role: &'static str,
    user: &str,
    work: impl FnOnce() -> Fut,
) -> Result<T>
where
    Fut: Future<Output = Result<T>>,
{
    op.span()
        .run(async move {
            validate::user_id(role, user)?;
            work().await
        })
        .await
}

impl FollowGraph {
    /// Runs `work`, a change between `owner` and `user` (a follow, a block, ...), in `op`'s span
    /// once they are known to be distinct registered users; `action` names what `owner` may not
    /// do to themselves. `work` is called once the checks pass.
    pub(super) async fn for_pair<T, Fut>(
        &self,
        op: Op,
        owner: &str,
        user: &str,
        action: &'static str,
        work: impl FnOnce() -> Fut,
    ) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        let checked = move || async move {
            validate::user_id("user", user)?;
            if owner == user {
                return Err(Error::InvalidInput {
                    reason: crate::error::Invalid::SelfAction {
                        user: owner.to_owned(),
                        action,
                    },
                });
            }
            self.check_users(&[owner, user]).await?;
            work().await
        };
        for_user(op, "owner", owner, checked).await
    }

    /// Fails unless every one of `ids` is a registered user.
    pub(super) async fn check_users(&self, ids: &[&str]) -> Result<()> {
        let found: Vec<Document> = self
            .users
            .find(doc! { "_id": { "$in": ids } })
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        let found: BTreeSet<&str> = found.iter().filter_map(|d| d.get_str("_id").ok()).collect();
        match ids.iter().find(|id| !found.contains(*id)) {
            Some(missing) => Err(Error::not_found(Entity::User, *missing)),
            None => Ok(()),
        }
    }

    /// Fails unless `user` (in the role `role`) and `group` are registered.
    pub(super) async fn check_user_and_group(
        &self,
        role: &'static str,
        user: &str,
        group: &str,
    ) -> Result<()> {
        validate::user_id(role, user)?;
        validate::id("group id", group)?;
        self.check_users(&[user]).await?;
        if self.groups.find_one(doc! { "_id": group }).await?.is_none() {
            return Err(Error::not_found(Entity::Group, group));
        }
        Ok(())
    }
}
