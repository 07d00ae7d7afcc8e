//! The follow graph as the social feed's [`FollowSource`].

use async_trait::async_trait;

use super::{FollowGraph, FollowSource};
use crate::{PageRequest, Result};

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
        let mut page = PageRequest::first(PageRequest::MAX_LIMIT);
        loop {
            let found = match side {
                Side::Followers => self.followers(user, page).await?,
                Side::Following => self.following(user, page).await?,
            };
            all.extend(found.items.into_iter().map(|s| match side {
                Side::Followers => s.owner,
                Side::Following => s.user,
            }));
            match found.next {
                Some(next) => page = PageRequest::after(PageRequest::MAX_LIMIT, next),
                None => return Ok(all),
            }
        }
    }
}
