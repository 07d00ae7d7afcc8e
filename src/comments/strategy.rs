//! The three strategies by name, and what each supports.

use super::{embedded, hybrid, per_comment};
use crate::strategy_enum::strategy_enum;

strategy_enum! {
    /// The three strategies, for display and for code that must know which one it holds.
    pub enum Strategy {
        /// One document per comment, with slug paths.
        PerComment => "per-comment", per_comment::COLLECTIONS;
        /// Every comment embedded in the discussion's document.
        Embedded => "embedded", embedded::COLLECTIONS;
        /// Pages of about 100 comments.
        HybridPages => "hybrid-pages", hybrid::COLLECTIONS;
    }
    example: "comments", Embedded => ["discussions", "comment_locks", "comment_votes"];
}

impl Strategy {
    /// What the strategy supports: its store's [`CommentStore::features`](super::CommentStore::features).
    ///
    /// ```
    /// use mongo_social::comments::Strategy;
    ///
    /// assert!(Strategy::PerComment.features().threading);
    /// assert!(!Strategy::HybridPages.features().threading);
    /// ```
    pub fn features(self) -> Features {
        let (threading, removes_leaves) = match self {
            Strategy::PerComment => (true, true),
            Strategy::Embedded => (true, false),
            Strategy::HybridPages => (false, false),
        };
        Features {
            threading,
            removes_leaves,
        }
    }
}

/// What a strategy supports beyond the [`CommentStore`](super::CommentStore) basics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Features {
    /// Replies, the threaded view and sub-threads
    /// ([`CommentStore::threaded`](super::CommentStore::threaded) is `Some`).
    pub threading: bool,
    /// A deleted comment without replies is removed outright rather than tombstoned.
    pub removes_leaves: bool,
}
