//! The lock a strategy's writers of one discussion share where the server needs them to take
//! turns: its posts, edits and deletes, and its votes ([`super::votes::VoteBook`]).

use std::fmt;

/// The lock a strategy's writers of `discussion` take where the server needs them to take turns
/// (see [`crate::backend::Backend::exclusive`]); `strategy` is the strategy's name.
pub(super) fn discussion_lock(strategy: impl fmt::Display, discussion: &str) -> String {
    format!("{strategy}:{discussion}")
}
