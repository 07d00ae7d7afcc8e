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
