//! How posts are ordered in a feed: a score per post, higher first, pluggable by the application.

use std::fmt;

use super::types::{FeedKind, PostId};

/// What a ranking knows about a post when it scores it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Candidate {
    /// The post.
    pub post: PostId,
    /// Its creator's user id.
    pub author: String,
    /// When it was created.
    pub created: bson::DateTime,
    /// Likes it received within the hot window (0 outside the "hot" feed, whose score is
    /// computed when the feed is refreshed; the others are scored when the post is created).
    pub recent_likes: u64,
    /// The time the score is computed at, from the store's clock.
    pub now: bson::DateTime,
}

/// Scores posts for a feed; a feed lists its posts by score, highest first, ties broken by the
/// newer post id.
///
/// Scores are computed once, when a post enters a feed ("latest" and per-user feeds: when the
/// post's fan-out job runs; "hot": at each refresh), and stored with the post id, so paging is
/// stable while posts arrive; a refresh or rebuild starts a new generation of the feed, whose
/// older cursors are refused. Return a finite number: a NaN or infinity is an
/// [`crate::Error::InvalidConfig`] where the post is scored.
///
/// An application implements it for a ranking of its own; the store calls it.
pub trait Ranking: Send + Sync + fmt::Debug + 'static {
    /// The score of `candidate` in `feed`.
    fn score(&self, feed: &FeedKind, candidate: &Candidate) -> f64;
}

/// A ranking of any kind, for `Arc<DynRanking>`.
pub type DynRanking = dyn Ranking;

/// Newest first in "latest" and per-user feeds (score: creation time in milliseconds); most
/// liked first in "hot" (score: likes in the window, ties to the newer post).
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultRanking;

impl Ranking for DefaultRanking {
    fn score(&self, feed: &FeedKind, candidate: &Candidate) -> f64 {
        match feed {
            FeedKind::Hot => candidate.recent_likes as f64,
            FeedKind::Latest | FeedKind::User(_) => candidate.created.timestamp_millis() as f64,
        }
    }
}
