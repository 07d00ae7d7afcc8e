//! Lists of subscriptions and members, and the counts.

use bson::{doc, Document};
use futures::TryStreamExt;

use super::checks::for_user;
use super::paging::{page_of, trim, user_page};
use super::{listed, FollowGraph, List, Subscription, UserStats};
use crate::error::{Entity, Error};
use crate::observe::spans::Op;
use crate::{bson_ext, validate};
use crate::{Page, PageRequest, Result};

impl FollowGraph {
    /// Whom `owner` follows, by any route: one page of the `{owner, user}` index, by user id.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) (also for a cursor of another list:
    /// another user's or group's, or the other direction), [`Invalid::PageLimit`](crate::error::Invalid::PageLimit), [`Invalid::Blank`](crate::error::Invalid::Blank) (a blank user id,
    /// or group id for a group's members).
    pub async fn following(&self, owner: &str, page: PageRequest) -> Result<Page<Subscription>> {
        let list = List::Following(owner);
        let read =
            move || self.subscription_page(listed(doc! { "owner": owner }), "user", list, page);
        for_user(Op::GraphFollowing, "owner", owner, read).await
    }

    /// Who follows `user`, by any route: one page of the `{user, owner}` index, by owner id.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::following`].
    pub async fn followers(&self, user: &str, page: PageRequest) -> Result<Page<Subscription>> {
        let list = List::Followers(user);
        let read =
            move || self.subscription_page(listed(doc! { "user": user }), "owner", list, page);
        for_user(Op::GraphFollowers, "user", user, read).await
    }

    /// The members of `group`, by user id.
    ///
    /// # Errors
    ///
    /// As [`FollowGraph::following`].
    pub async fn members(&self, group: &str, page: PageRequest) -> Result<Page<String>> {
        Op::GraphMembers
            .span()
            .run(async move {
                validate::id("group id", group)?;
                let list = List::Members(group);
                user_page(&self.members, doc! { "group": group }, list, &page).await
            })
            .await
    }

    /// Which of `users` `owner` follows, by any route (one query).
    pub async fn follows_any(&self, owner: &str, users: &[String]) -> Result<Vec<String>> {
        let read = move || self.subscribed(("owner", owner), ("user", users));
        for_user(Op::GraphFollowsAny, "owner", owner, read).await
    }

    /// Which of `owners` follow `user`, by any route (one query).
    pub async fn followers_among(&self, user: &str, owners: &[String]) -> Result<Vec<String>> {
        let read = move || self.subscribed(("user", user), ("owner", owners));
        for_user(Op::GraphFollowersAmong, "user", user, read).await
    }

    /// The `other.0` of each subscription whose `fixed.0` is `fixed.1` and whose `other.0` is
    /// one of `other.1`.
    async fn subscribed(
        &self,
        fixed: (&str, &str),
        other: (&str, &[String]),
    ) -> Result<Vec<String>> {
        if other.1.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<Document> = self
            .subscriptions
            .find(listed(
                doc! { fixed.0: fixed.1, other.0: { "$in": other.1 } },
            ))
            .projection(doc! { other.0: 1 })
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| d.get_str(other.0).ok().map(str::to_owned))
            .collect())
    }

    /// Whether and how `owner` follows `user`.
    pub async fn subscription(&self, owner: &str, user: &str) -> Result<Option<Subscription>> {
        Op::GraphSubscription
            .span()
            .run(async move {
                validate::user_id("owner", owner)?;
                validate::user_id("user", user)?;
                let found = self
                    .subscriptions
                    .find_one(listed(doc! { "owner": owner, "user": user }))
                    .await?;
                let collection = self.subscriptions.name();
                found
                    .as_ref()
                    .map(|found| Subscription::from_document(collection, found))
                    .transpose()
            })
            .await
    }

    /// A user's follower and following counts (one read of the stats document).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unregistered user.
    pub async fn stats(&self, user: &str) -> Result<UserStats> {
        let read = move || async move {
            let found = self
                .users
                .find_one(doc! { "_id": user })
                .await?
                .ok_or_else(|| Error::not_found(Entity::User, user))?;
            Ok(UserStats {
                followers: bson_ext::count(&found, "followers"),
                following: bson_ext::count(&found, "following"),
            })
        };
        for_user(Op::GraphStats, "user", user, read).await
    }

    async fn subscription_page(
        &self,
        filter: Document,
        field: &str,
        list: List<'_>,
        page: PageRequest,
    ) -> Result<Page<Subscription>> {
        let documents = page_of(&self.subscriptions, filter, field, list, &page).await?;
        let items = documents
            .iter()
            .map(|found| Subscription::from_document(self.subscriptions.name(), found))
            .collect::<Result<Vec<_>>>()?;
        Ok(trim(items, page.limit, list, |s| {
            if field == "user" {
                &s.user
            } else {
                &s.owner
            }
        }))
    }
}
