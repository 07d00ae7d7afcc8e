//! The three strategies by name, what each supports, and the lock their writers share.

use std::fmt;

use super::{embedded, hybrid, per_comment};

/// The three strategies, for display and for code that must know which one it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// One document per comment, with slug paths.
    PerComment,
    /// Every comment embedded in the discussion's document.
    Embedded,
    /// Pages of about 100 comments.
    HybridPages,
}

impl Strategy {
    /// The strategy's name, such as `"per-comment"`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::PerComment => "per-comment",
            Strategy::Embedded => "embedded",
            Strategy::HybridPages => "hybrid-pages",
        }
    }

    /// The default names of the strategy's collections: what its builder's `collection`
    /// renames, and what `collection_prefix` is put before.
    ///
    /// ```
    /// use mongo_social::comments::Strategy;
    /// assert_eq!(
    ///     Strategy::Embedded.collections(),
    ///     ["discussions", "comment_locks", "comment_votes"]
    /// );
    /// ```
    pub fn collections(self) -> &'static [&'static str] {
        match self {
            Strategy::PerComment => &per_comment::COLLECTIONS,
            Strategy::Embedded => &embedded::COLLECTIONS,
            Strategy::HybridPages => &hybrid::COLLECTIONS,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

/// The lock a strategy's writers of `discussion` take where the server needs them to take
/// turns (see [`crate::backend::Backend::exclusive`]).
pub(super) fn discussion_lock(strategy: Strategy, discussion: &str) -> String {
    format!("{strategy}:{discussion}")
}
