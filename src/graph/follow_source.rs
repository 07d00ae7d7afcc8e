//! The follow graph as the social feed's [`FollowSource`].

use async_trait::async_trait;

use super::FollowSource;
use super::{FollowGraph, GraphQuery};
use crate::Result;

/// Per-user feeds built from the graph: followers and followees by any route (direct or through
/// a group), read up to 10,000 a page.
#[async_trait]
impl FollowSource for FollowGraph {
    async fn followers_of(&self, user: &str) -> Result<Vec<String>> {
        self.everyone(user, Side::Followers).await
    }

    async fn followees_of(&self, user: &str) -> Result<Vec<String>> {
        self.everyone(user, Side::Following).await
    }
}

#[derive(Clone, Copy)]
enum Side {
    Followers,
    Following,
}

impl FollowGraph {
    /// Every follower of `user`, or everyone `user` follows, following the cursor to the end.
    async fn everyone(&self, user: &str, side: Side) -> Result<Vec<String>> {
        let mut all = Vec::new();
        let mut query = GraphQuery::first(GraphQuery::MAX_LIMIT);
        loop {
            let page = match side {
                Side::Followers => self.followers(user, &query).await?,
                Side::Following => self.following(user, &query).await?,
            };
            all.extend(page.items.into_iter().map(|s| match side {
                Side::Followers => s.owner,
                Side::Following => s.user,
            }));
            match page.next {
                Some(next) => query = GraphQuery::after(GraphQuery::MAX_LIMIT, next),
                None => return Ok(all),
            }
        }
    }
}
