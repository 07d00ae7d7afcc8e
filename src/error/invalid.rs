//! Why the caller's input was refused ([`Invalid`]).

/// Why the caller's input was refused ([`Error::InvalidInput`]), before anything was written.
///
/// [`Error::InvalidInput`]: super::Error::InvalidInput
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    /// Required text was empty or only whitespace.
    #[error("{what} must not be blank")]
    Blank {
        /// What was blank: for a user id, its role (`"sender"`, `"recipient"`, `"owner"`,
        /// `"user"`, `"author"`, `"actor"`); otherwise the field (`"group id"`,
        /// `"discussion id"`, `"username"`, `"target"`, `"kind"`, `"text"`, `"title and body"`,
        /// `"media url"`, `"search terms"`, `"job kind"`).
        what: &'static str,
    },

    /// An id (of a user, a discussion, a group, a feed, ...) is longer than
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES), which keeps every index key holding it within what
    /// every engine's indexes take.
    #[error("{what} is {bytes} bytes long, longer than the {max} bytes an id may have")]
    TooLong {
        /// The id's role, as for [`Invalid::Blank`]; `"notification target"` for the target a
        /// reply's notification would have
        /// ([`ThreadedComments::reply`](crate::comments::ThreadedComments::reply)).
        what: &'static str,
        /// Its length in bytes.
        bytes: usize,
        /// The limit.
        max: usize,
    },

    /// Something to be stored (a message, a post, a comment, a recipient list, a notification's
    /// data, a job's payload, a user's profile) encodes to more bytes than the store accepts, or
    /// than the document that would hold it can take (an embedded discussion:
    /// [`HybridPages`](crate::HybridPages) spreads a long one over pages). Every store checks
    /// this before it sends anything to the server; each method's `# Errors` names its limit.
    #[error(
        "{what} is {size} bytes, larger than the {limit} bytes allowed{}",
        too_large_hint(what)
    )]
    TooLarge {
        /// What was too large (`"message"`, `"post"`, `"comment"`, `"recipient list"`,
        /// `"discussion"`, `"job payload"`, `"notification data"`, `"user"`,
        /// `"extended user"`).
        what: &'static str,
        /// Encoded size in bytes.
        size: usize,
        /// Largest encoded size accepted.
        limit: usize,
    },

    /// A message was sent to nobody.
    #[error("a message needs at least one recipient")]
    NoRecipients,

    /// The same recipient was named twice in one message.
    #[error("recipient `{recipient}` is named more than once")]
    DuplicateRecipient {
        /// The repeated recipient.
        recipient: String,
    },

    /// A page cursor was not produced by this store for this scope, or was altered.
    #[error("invalid page cursor: {reason}")]
    Cursor {
        /// Why the cursor was rejected.
        reason: String,
    },

    /// A page request asked for zero items or more than the store allows.
    #[error("page limit {limit} is out of range 1..={max}")]
    PageLimit {
        /// The requested limit.
        limit: usize,
        /// The largest allowed limit.
        max: usize,
    },

    /// A user named themselves where the operation needs another user: following, blocking or
    /// dismissing themselves.
    #[error("user `{user}` cannot {action} themselves")]
    SelfAction {
        /// The user.
        user: String,
        /// What they tried: `"follow"`, `"block"` or `"dismiss"`.
        action: &'static str,
    },

    /// A comment link (slug path or position path) is not one this strategy makes.
    #[error("invalid comment link `{link}`: {reason}")]
    Link {
        /// The link as given.
        link: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A comment vote other than up (1) or down (-1), or 0 where a retraction is meant.
    #[error("invalid vote {value}: a vote is 1 (up) or -1 (down), or 0 to take it back")]
    Vote {
        /// The value as given.
        value: i64,
    },

    /// A reply would nest deeper than the strategy can index or store.
    #[error("a reply at depth {depth} would exceed this strategy's limit: {limit}")]
    ThreadTooDeep {
        /// Depth the reply would have (top-level comments have depth 0).
        depth: usize,
        /// The limit that would be passed, in words.
        limit: String,
    },

    /// A name a request gave (a sort, an order, a vote, a notification kind) is not one of the
    /// values it may take.
    #[error("unknown {what} `{value}`; expected one of: {expected}")]
    Name {
        /// What was named (`"sort"`, `"order"`, `"vote"`, `"notification kind"`).
        what: &'static str,
        /// The name as given.
        value: String,
        /// The accepted names.
        expected: &'static str,
    },
}

/// What to do about something too large, where there is a better place for it.
fn too_large_hint(what: &str) -> &'static str {
    match what {
        "discussion" => {
            "; a discussion this long belongs in the hybrid strategy (`HybridPages`), which \
             spreads comments over pages"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn one_variant_for_blank_text_and_one_for_too_large() {
        let blank = Error::from(Invalid::Blank { what: "owner" });
        assert_eq!(blank.to_string(), "owner must not be blank");
        let too_large = Error::from(Invalid::TooLarge {
            what: "message",
            size: 400_000,
            limit: 335_544,
        });
        assert_eq!(
            too_large.to_string(),
            "message is 400000 bytes, larger than the 335544 bytes allowed"
        );
        for error in [blank, too_large] {
            assert!(error.is_invalid_input() && !error.is_retryable(), "{error}");
        }
    }
}
