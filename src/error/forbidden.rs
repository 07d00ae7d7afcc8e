//! Why a user may not do what they asked ([`Forbidden`]).

/// Why a user may not do what they asked ([`Error::Forbidden`]); nothing was written.
///
/// [`Error::Forbidden`]: super::Error::Forbidden
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Forbidden {
    /// A user edited or retracted a message someone else sent.
    #[error("`{user}` did not send message `{id}`, so cannot change it")]
    NotSender {
        /// Who tried to change the message.
        user: String,
        /// The message's id.
        id: String,
    },

    /// A direct follow between two users one of whom has blocked the other
    /// ([`FollowGraph::block`](crate::graph::FollowGraph::block)), until the block is lifted.
    #[error("`{blocked}` is blocked by `{by}`: no direct follow between them")]
    Blocked {
        /// Who blocked.
        by: String,
        /// Whom.
        blocked: String,
    },
}
