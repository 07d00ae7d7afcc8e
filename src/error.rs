//! The crate's error type.

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in this crate, each variant naming what happened.
///
/// Input errors ([`Error::NoRecipients`], [`Error::InvalidCursor`], ...) are detected before
/// anything is written, so an operation that fails with one of them has changed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A message was sent to nobody.
    #[error("a message needs at least one recipient")]
    NoRecipients,

    /// The same recipient was named twice in one message.
    #[error("recipient `{recipient}` is named more than once")]
    DuplicateRecipient {
        /// The repeated recipient.
        recipient: String,
    },

    /// A user id was empty or only whitespace. Every module refuses a blank user id with this
    /// variant (inbox, comments, graph, delivery, feed), before anything is written.
    #[error("{what} must not be an empty user id")]
    EmptyUserId {
        /// Which role the id had (`"sender"`, `"recipient"`, `"owner"`, `"user"`, `"author"`).
        what: &'static str,
    },

    /// A page cursor was not produced by this store, or was altered.
    #[error("invalid page cursor: {reason}")]
    InvalidCursor {
        /// Why the cursor was rejected.
        reason: String,
    },

    /// A page request asked for zero items or more than the store allows.
    #[error("page limit {limit} is out of range 1..={max}")]
    InvalidPageLimit {
        /// The requested limit.
        limit: usize,
        /// The largest allowed limit.
        max: usize,
    },

    /// A store was configured with a value it cannot work with.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with the configuration.
        reason: String,
    },

    /// A message (or the document that would hold it) is larger than the server accepts.
    #[error("message is {size} bytes, larger than the {limit} bytes this strategy can store")]
    MessageTooLarge {
        /// Encoded size of the message in bytes.
        size: usize,
        /// Largest encoded size the strategy accepts.
        limit: usize,
    },

    /// Something an operation names does not exist (a post, a user, a discussion, a comment).
    #[error("unknown {what} `{id}`")]
    NotFound {
        /// What kind of thing was looked up (`"post"`, `"user"`, `"group"`, `"discussion"`,
        /// `"comment"`, `"parent comment"`, ...).
        what: &'static str,
        /// The id that was not found.
        id: String,
    },

    /// Something to be created exists already (a user id, a username).
    #[error("{what} `{id}` already exists")]
    AlreadyExists {
        /// What kind of thing clashed (`"user"`, `"username"`).
        what: &'static str,
        /// The clashing id or value.
        id: String,
    },

    /// A required text field other than a user id (see [`Error::EmptyUserId`]) was empty or
    /// only whitespace.
    #[error("{field} must not be empty")]
    EmptyField {
        /// Which field (`"title and body"`, `"username"`, `"group id"`, `"text"`,
        /// `"discussion id"`, `"search terms"`, `"job kind"`, ...).
        field: &'static str,
    },

    /// A document (a post, a user) is larger than the store accepts.
    #[error("{what} is {size} bytes, larger than the {limit} bytes allowed")]
    TooLarge {
        /// What was too large (`"post"`, `"user"`, `"comment"`).
        what: &'static str,
        /// Encoded size in bytes.
        size: usize,
        /// Largest encoded size accepted.
        limit: usize,
    },

    /// Waiting for something (a job queue to drain) took longer than allowed.
    #[error("{what} did not finish within {waited:?}")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// How long it was waited for.
        waited: std::time::Duration,
    },

    /// A user tried to follow themselves.
    #[error("user `{user}` cannot follow themselves")]
    SelfFollow {
        /// The user.
        user: String,
    },

    /// A comment link (slug path or position path) is not one this strategy makes.
    #[error("invalid comment link `{link}`: {reason}")]
    InvalidLink {
        /// The link as given.
        link: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A reply would nest deeper than the strategy can index or store.
    #[error("a reply at depth {depth} would exceed this strategy's limit: {limit}")]
    ThreadTooDeep {
        /// Depth the reply would have (top-level comments have depth 0).
        depth: usize,
        /// The limit that would be passed, in words.
        limit: String,
    },

    /// A discussion whose comments are embedded in one document has no room for this change.
    #[error(
        "discussion `{discussion}` would grow to about {size} bytes, past its {limit}-byte \
         document limit; a discussion this long belongs in the hybrid strategy \
         (`HybridPages`), which spreads comments over pages"
    )]
    DiscussionFull {
        /// The discussion.
        discussion: String,
        /// Estimated size of the document after the change.
        size: usize,
        /// Largest size the strategy lets the document reach.
        limit: usize,
    },

    /// An edit or delete named a comment that was already deleted.
    #[error("comment `{link}` was deleted")]
    CommentDeleted {
        /// The comment's link.
        link: String,
    },

    /// The server lacks something an operation needs.
    #[error("{feature} is not supported here: {reason}")]
    NotSupported {
        /// The missing feature.
        feature: &'static str,
        /// Why it is unavailable.
        reason: String,
    },

    /// No server could be reached within the client's server selection timeout.
    #[error("MongoDB server unreachable: {0}")]
    Unreachable(#[source] mongodb::error::Error),

    /// Work ran longer than the lease on its lock, and another writer took the lock over: the
    /// work stopped where it was. Retrying the operation completes it.
    #[error("the lease on `{key}` ran out and was taken over; retry the operation")]
    LeaseLost {
        /// The lock's key.
        key: String,
    },

    /// Concurrent writers kept invalidating each other's work past the retry budget.
    #[error("gave up after {attempts} attempts under write contention")]
    Contention {
        /// How many rounds were tried.
        attempts: usize,
    },

    /// The server refused a write with an error this crate does not handle itself.
    #[error("write failed with code {code}: {message}")]
    Write {
        /// The server's error code.
        code: i32,
        /// The server's error message.
        message: String,
    },

    /// A value could not be encoded to BSON.
    #[error("could not encode to BSON: {0}")]
    Encode(#[from] bson::ser::Error),

    /// A stored document could not be decoded (for example, a payload of another type).
    #[error("could not decode a stored document: {0}")]
    Decode(#[from] bson::de::Error),

    /// Any other error reported by the driver or the server.
    #[error("MongoDB error: {0}")]
    Database(#[source] mongodb::error::Error),

    /// An operation kept failing with transient errors (see [`Error::is_retryable`]) until its
    /// [`RetryPolicy`](crate::RetryPolicy) budget ran out. It may be partly applied: for example
    /// a message delivered to some of its recipients. Every operation the library retries is
    /// idempotent, so calling it again (with the same message, like, job) completes it without
    /// applying anything twice.
    #[error(
        "{operation} gave up after {attempts} attempts in {elapsed:?} and may be partly \
         applied; the last failure: {last}"
    )]
    RetriesExhausted {
        /// What was attempted (`"update batch"`, `"like"`, ...).
        operation: &'static str,
        /// How many attempts were made.
        attempts: u32,
        /// Time from the first attempt to giving up.
        elapsed: std::time::Duration,
        /// The last transient failure.
        #[source]
        last: Box<Error>,
    },
}

impl Error {
    /// Whether the failure is transient: the same call, made again a little later, may succeed.
    ///
    /// True for network and I/O errors, an unreachable server, a cleared connection pool, errors
    /// labelled `RetryableWriteError`, `TransientTransactionError` or `RetryableError`, the server
    /// codes of stepped-down or shutting-down nodes, write conflicts, lock and time-limit
    /// timeouts (6, 7, 24, 89, 91, 112, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436), and
    /// PostgreSQL deadlocks reported by DocumentDB (16908292); also for
    /// [`Error::RetriesExhausted`], [`Error::Contention`] and [`Error::LeaseLost`]. False for
    /// input errors and anything else the server refused.
    ///
    /// The library has already retried such failures within its [`RetryPolicy`](crate::RetryPolicy)
    /// before returning one; a caller retrying further should back off.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::RetriesExhausted { .. } | Error::Contention { .. } | Error::LeaseLost { .. } => {
                true
            }
            _ => self.is_transient(),
        }
    }

    /// Whether something the operation names does not exist ([`Error::NotFound`]).
    ///
    /// ```
    /// let error = mongo_social::Error::NotFound { what: "post", id: "p1".into() };
    /// assert!(error.is_not_found() && !error.is_retryable());
    /// ```
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Whether something to be created exists already ([`Error::AlreadyExists`]).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, Error::AlreadyExists { .. })
    }

    /// Whether the caller's input was refused before anything was written: an empty, repeated
    /// or malformed value, a cursor or link this store did not make, a page limit out of range,
    /// something too large or too deep, a self-follow. Calling again with the same input fails
    /// the same way.
    ///
    /// ```
    /// let error = mongo_social::Error::InvalidPageLimit { limit: 0, max: 1000 };
    /// assert!(error.is_invalid_input());
    /// ```
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::NoRecipients
                | Error::DuplicateRecipient { .. }
                | Error::EmptyUserId { .. }
                | Error::EmptyField { .. }
                | Error::InvalidCursor { .. }
                | Error::InvalidPageLimit { .. }
                | Error::MessageTooLarge { .. }
                | Error::TooLarge { .. }
                | Error::SelfFollow { .. }
                | Error::InvalidLink { .. }
                | Error::ThreadTooDeep { .. }
        )
    }

    /// Whether one attempt failed for a reason that another attempt may not meet: the failures
    /// the library itself retries.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable(_) => true,
            Error::Write { code, .. } => crate::retry::is_transient_code(*code),
            Error::Database(error) => crate::retry::is_transient_driver_error(error),
            _ => false,
        }
    }
}

impl From<mongodb::error::Error> for Error {
    fn from(error: mongodb::error::Error) -> Self {
        match *error.kind {
            mongodb::error::ErrorKind::ServerSelection { .. } => Error::Unreachable(error),
            _ => Error::Database(error),
        }
    }
}
