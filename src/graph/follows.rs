//! Who follows whom, as the feed and the delivery read it: the [`FollowSource`] trait, which
//! [`super::FollowGraph`] implements, and [`FollowList`], follows kept in memory by an
//! application that holds its graph elsewhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{PoisonError, RwLock};

use async_trait::async_trait;

use crate::Result;

/// The follow graph as the feeds and the delivery need it.
///
/// Per-user feeds are built on write from [`FollowSource::followers_of`] (a new post goes into
/// each follower's feed) and rebuilt on demand from [`FollowSource::followees_of`] (a returning
/// user's feed is refilled with the latest posts of whom they follow).
///
/// An application implements it for a follow graph of its own;
/// [`FollowGraph`](crate::FollowGraph) implements it for the crate's.
#[async_trait]
pub trait FollowSource: Send + Sync + fmt::Debug + 'static {
    /// Users who follow `user`.
    async fn followers_of(&self, user: &str) -> Result<Vec<String>>;

    /// Users whom `user` follows.
    async fn followees_of(&self, user: &str) -> Result<Vec<String>>;
}

/// A follow source of any kind, for `Arc<DynFollowSource>`.
pub type DynFollowSource = dyn FollowSource;

/// Follows held in memory, as the application provides them: for tests, examples and
/// applications that keep the graph elsewhere and load it at startup.
///
/// ```
/// use mongo_social::graph::FollowList;
/// let follows = FollowList::new();
/// follows.follow("bob", "ann"); // bob follows ann
/// assert!(follows.is_following("bob", "ann"));
/// ```
#[derive(Debug, Default)]
pub struct FollowList {
    /// followee -> followers, and follower -> followees.
    edges: RwLock<(Edges, Edges)>,
}

type Edges = BTreeMap<String, BTreeSet<String>>;

impl FollowList {
    /// No one follows anyone.
    pub fn new() -> Self {
        Self::default()
    }

    /// A list from `(follower, followee)` pairs.
    pub fn from_pairs<I, A, B>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (A, B)>,
        A: Into<String>,
        B: Into<String>,
    {
        let list = Self::new();
        for (follower, followee) in pairs {
            list.follow(follower, followee);
        }
        list
    }

    /// `follower` starts following `followee`.
    pub fn follow(&self, follower: impl Into<String>, followee: impl Into<String>) {
        let (follower, followee) = (follower.into(), followee.into());
        let mut edges = self.edges.write().unwrap_or_else(PoisonError::into_inner);
        edges
            .0
            .entry(followee.clone())
            .or_default()
            .insert(follower.clone());
        edges.1.entry(follower).or_default().insert(followee);
    }

    /// `follower` stops following `followee`.
    pub fn unfollow(&self, follower: &str, followee: &str) {
        let mut edges = self.edges.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(followers) = edges.0.get_mut(followee) {
            followers.remove(follower);
        }
        if let Some(followees) = edges.1.get_mut(follower) {
            followees.remove(followee);
        }
    }

    /// Whether `follower` follows `followee`.
    pub fn is_following(&self, follower: &str, followee: &str) -> bool {
        let edges = self.edges.read().unwrap_or_else(PoisonError::into_inner);
        edges
            .1
            .get(follower)
            .is_some_and(|followees| followees.contains(followee))
    }

    fn list(&self, pick: fn(&(Edges, Edges)) -> &Edges, user: &str) -> Vec<String> {
        let edges = self.edges.read().unwrap_or_else(PoisonError::into_inner);
        pick(&edges)
            .get(user)
            .map(|users| users.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[async_trait]
impl FollowSource for FollowList {
    async fn followers_of(&self, user: &str) -> Result<Vec<String>> {
        Ok(self.list(|edges| &edges.0, user))
    }

    async fn followees_of(&self, user: &str) -> Result<Vec<String>> {
        Ok(self.list(|edges| &edges.1, user))
    }
}
