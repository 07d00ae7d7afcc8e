//! The crate's error type: [`Error`], one variant per kind of failure; [`Invalid`] and
//! [`Forbidden`], the reasons of its input and permission kinds; [`Entity`], what a
//! [`Error::NotFound`] or [`Error::AlreadyExists`] names; and, in [`transient`], how a failure
//! that may pass by itself is told from one the request caused.

pub mod transient;

use std::fmt;

use bson::Bson;

/// A `Result` whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in this crate: one variant per kind of failure a caller tells
/// apart (and maps to a response: bad request, not found, conflict, forbidden, try again,
/// server error), with the detail in its fields.
///
/// | variant | what happened | try again? |
/// |---|---|---|
/// | [`InvalidInput`](Error::InvalidInput) | the caller's input was refused ([`Invalid`] says why), before anything was written | no |
/// | [`InvalidConfig`](Error::InvalidConfig) | a store was built with values it cannot work with | no |
/// | [`NotFound`](Error::NotFound) | what the operation names does not exist (or was deleted) | no |
/// | [`AlreadyExists`](Error::AlreadyExists) | what the operation creates exists already | no |
/// | [`Conflict`](Error::Conflict) | a repeated create (same caller-chosen id) with other content | no |
/// | [`Forbidden`](Error::Forbidden) | the user may not do this ([`Forbidden`] says why) | no |
/// | [`Unsupported`](Error::Unsupported) | the server or the strategy does not offer this ([`Limit`]) | no |
/// | [`Unreachable`](Error::Unreachable) | the database could not be reached, or the connection to it was lost | yes |
/// | [`RetriesExhausted`](Error::RetriesExhausted) | transient failures or concurrent writers outlasted the retry budget | yes |
/// | [`Timeout`](Error::Timeout) | waiting for background work took longer than allowed | yes |
/// | [`Database`](Error::Database) | the server refused the operation with an error of its own | no |
/// | [`Encode`](Error::Encode), [`Decode`](Error::Decode) | a value did not encode to BSON; a stored document did not decode | no |
/// | [`Handler`](Error::Handler) | an application's job handler failed | (the job queue runs it again) |
///
/// [`Error::is_retryable`] says which; an operation that failed with an input error has changed
/// nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller's input was refused before anything was written: calling again with the same
    /// input fails the same way. [`Invalid`] says what was wrong.
    #[error(transparent)]
    InvalidInput(#[from] Invalid),

    /// A store was configured with a value it cannot work with.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with the configuration.
        reason: String,
    },

    /// Something an operation names does not exist (a post, a user, a discussion, a comment), or
    /// no longer does ([`Entity::DeletedComment`]).
    #[error("unknown {what} `{id}`")]
    NotFound {
        /// What kind of thing was looked up.
        what: Entity,
        /// The id that was not found.
        id: String,
    },

    /// Something to be created exists already (a user id, a username).
    #[error("{what} `{id}` already exists")]
    AlreadyExists {
        /// What kind of thing clashed ([`Entity::User`], [`Entity::Username`]).
        what: Entity,
        /// The clashing id or value.
        id: String,
    },

    /// A create repeated with the same caller-chosen id (an idempotency key) but other content:
    /// the first create stands, and nothing was written.
    #[error("{what} `{id}` was created already with other content: {reason}")]
    Conflict {
        /// What was created.
        what: Entity,
        /// The caller-chosen id.
        id: String,
        /// What differs.
        reason: &'static str,
    },

    /// The user may not do this; nothing was written. [`Forbidden`] says why.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),

    /// The server lacks something an operation needs, or the store's strategy does not offer it.
    #[error("{feature} is not supported by this {limit}: {reason}")]
    Unsupported {
        /// The missing feature.
        feature: &'static str,
        /// Whether the server or the strategy lacks it.
        limit: Limit,
        /// Why it is unavailable.
        reason: String,
    },

    /// The database could not be reached, or the connection to it was lost, and did not come
    /// back within the store's [`RetryPolicy`](crate::RetryPolicy): no server answered within
    /// the client's server selection timeout, a connection failed, or (behind FerretDB 2.x) its
    /// PostgreSQL was restarting. Every operation of every store reports an outage this way.
    /// A write may have been applied before the connection was lost; every write of this crate
    /// is idempotent, so calling it again completes it once.
    #[error("the database is unreachable: {reason}")]
    Unreachable {
        /// What was seen, in words.
        reason: String,
        /// The driver's error, where it reported one (none when the retry budget ran out
        /// waiting for a reply).
        #[source]
        source: Option<mongodb::error::Error>,
    },

    /// Transient failures (write conflicts, deadlocks) or concurrent writers changing what the
    /// operation read kept it from completing within the store's
    /// [`RetryPolicy`](crate::RetryPolicy). It may be partly applied (a message delivered to
    /// some of its recipients); every operation the library retries is idempotent, so calling
    /// it again completes it without applying anything twice.
    #[error(
        "{operation} gave up after {attempts} attempts and may be partly applied{}",
        Last(.last)
    )]
    RetriesExhausted {
        /// What was attempted (`"update batch"`, `"like"`, ...).
        operation: &'static str,
        /// How many attempts (or rounds) were made.
        attempts: u32,
        /// The last transient failure; `None` where concurrent writers kept changing what the
        /// operation read, or a lock's lease ran out under it.
        #[source]
        last: Option<Box<Error>>,
    },

    /// Waiting for something (a job queue to drain) took longer than allowed.
    #[error("{what} did not finish within {waited:?}")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// How long it was waited for.
        waited: std::time::Duration,
    },

    /// The server refused the operation with an error this crate does not handle itself.
    ///
    /// `code` and `message` are the server's (`code` is `None` for a failure without one).
    /// Where the driver reported the failure, its error is the
    /// [`source`](std::error::Error::source); where the crate read it from a command's reply
    /// itself (an entry of an `update` command's `writeErrors`), `source` is `None`.
    #[error("{}", DatabaseMessage(*.code, .message))]
    Database {
        /// The server's error code.
        code: Option<i32>,
        /// The server's (or the driver's) message.
        message: String,
        /// The driver's error, when the driver reported the failure.
        #[source]
        source: Option<mongodb::error::Error>,
    },

    /// A value could not be encoded to BSON.
    #[error("could not encode to BSON: {0}")]
    Encode(#[from] bson::ser::Error),

    /// A stored document could not be decoded (for example, a payload of another type, or a
    /// field the crate needs missing): names the collection and the document's `_id`, for the
    /// application to find it.
    #[error("could not decode {} in `{collection}`: {source}", DocumentId(.id))]
    Decode {
        /// The collection the document was read from.
        collection: String,
        /// The document's `_id` (`None` for a document without one); for a message in an inbox
        /// bucket, the message's own `id`. Boxed, to keep every `Result` of the crate small.
        id: Option<Box<Bson>>,
        /// What did not decode.
        #[source]
        source: bson::de::Error,
    },

    /// An application's [`JobHandler`](crate::jobs::JobHandler) failed with an error of its
    /// own; build it with [`Job::error`](crate::jobs::Job::error). The job queue records the text on the job and
    /// runs the job again later.
    #[error("job `{kind}` failed: {source}")]
    Handler {
        /// The kind of the job that failed.
        kind: String,
        /// The handler's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Why the caller's input was refused ([`Error::InvalidInput`]), before anything was written.
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
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES), which keeps every index key holding it within what
    /// every engine's indexes take.
    #[error("{what} is {bytes} bytes long, longer than the {max} bytes an id may have")]
    TooLong {
        /// The id's role, as for [`Invalid::Blank`]; `"notification target"` for the target a
        /// reply's notification would have
        /// ([`ThreadedComments::reply`](crate::ThreadedComments::reply)).
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

/// Why a user may not do what they asked ([`Error::Forbidden`]); nothing was written.
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

/// What lacks a feature an operation asked for ([`Error::Unsupported`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// The server (for example, change streams on a standalone server).
    Server,
    /// The store's strategy (for example, replies in [`HybridPages`](crate::HybridPages), which
    /// does not thread).
    Strategy,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Server => "server",
            Limit::Strategy => "strategy",
        })
    }
}

impl Error {
    /// The kind of failure, as a stable `snake_case` name of its variant, for logs, metrics and
    /// an API's error responses: `"invalid_input"`, `"invalid_config"`, `"not_found"`,
    /// `"already_exists"`, `"conflict"`, `"forbidden"`, `"unsupported"`, `"unreachable"`,
    /// `"retries_exhausted"`, `"timeout"`, `"database"`, `"encode"`, `"decode"`, `"handler"`.
    /// A name never changes meaning; a variant added later gets a new one.
    ///
    /// ```
    /// use mongo_social::{Entity, Error};
    /// let error = Error::NotFound { what: Entity::Discussion, id: "d1".into() };
    /// assert_eq!(error.kind(), "not_found");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidInput(_) => "invalid_input",
            Error::InvalidConfig { .. } => "invalid_config",
            Error::NotFound { .. } => "not_found",
            Error::AlreadyExists { .. } => "already_exists",
            Error::Conflict { .. } => "conflict",
            Error::Forbidden(_) => "forbidden",
            Error::Unsupported { .. } => "unsupported",
            Error::Unreachable { .. } => "unreachable",
            Error::RetriesExhausted { .. } => "retries_exhausted",
            Error::Timeout { .. } => "timeout",
            Error::Database { .. } => "database",
            Error::Encode(_) => "encode",
            Error::Decode { .. } => "decode",
            Error::Handler { .. } => "handler",
        }
    }

    /// Whether the failure is transient: the same call, made again a little later, may succeed
    /// ([`Error::Unreachable`], [`Error::RetriesExhausted`], [`Error::Timeout`], and a
    /// [`Error::Database`] whose code is one of the transient ones of [`transient`]). The
    /// library has already retried within its [`RetryPolicy`](crate::RetryPolicy) before
    /// returning one; a caller retrying further should back off.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unreachable { .. } | Error::RetriesExhausted { .. } | Error::Timeout { .. } => {
                true
            }
            Error::Database {
                code: Some(code), ..
            } => transient::is_transient_code(*code),
            _ => false,
        }
    }

    /// Whether the caller's input was refused before anything was written
    /// ([`Error::InvalidInput`]).
    ///
    /// ```
    /// use mongo_social::error::{Error, Invalid};
    ///
    /// let error = Error::from(Invalid::PageLimit { limit: 0, max: 1000 });
    /// assert!(error.is_invalid_input() && !error.is_retryable());
    /// ```
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Error::InvalidInput(_))
    }

    /// What was wrong with the input, for an [`Error::InvalidInput`].
    pub fn invalid_input(&self) -> Option<&Invalid> {
        match self {
            Error::InvalidInput(invalid) => Some(invalid),
            _ => None,
        }
    }

    /// Whether something the operation names does not exist ([`Error::NotFound`]).
    ///
    /// ```
    /// use mongo_social::{Entity, Error};
    ///
    /// let error = Error::NotFound { what: Entity::Post, id: "p1".into() };
    /// assert!(error.is_not_found() && !error.is_retryable());
    /// ```
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Whether something to be created exists already ([`Error::AlreadyExists`]).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, Error::AlreadyExists { .. })
    }

    /// Whether the database could not be reached ([`Error::Unreachable`]).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable { .. })
    }

    /// The server's error code, where the server refused the operation ([`Error::Database`]).
    /// `None` for every other error.
    ///
    /// ```
    /// let error = mongo_social::Error::Database {
    ///     code: Some(11000),
    ///     message: "E11000 duplicate key error".into(),
    ///     source: None,
    /// };
    /// assert_eq!(error.code(), Some(11000));
    /// ```
    pub fn code(&self) -> Option<i32> {
        match self {
            Error::Database { code, .. } => *code,
            _ => None,
        }
    }

    /// [`Error::RetriesExhausted`] for an operation whose `attempts` rounds kept meeting
    /// concurrent writers (no failure of its own).
    pub(crate) fn contention(operation: &'static str, attempts: usize) -> Self {
        Error::RetriesExhausted {
            operation,
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            last: None,
        }
    }

    /// A failure the server reported in a command's reply (an entry of `writeErrors`), with no
    /// driver error.
    #[cfg(test)]
    pub(crate) fn from_reply(code: i32, message: impl Into<String>) -> Self {
        Error::Database {
            code: Some(code),
            message: message.into(),
            source: None,
        }
    }

    /// Whether one attempt failed for a reason that another attempt may not meet: the failures
    /// the library itself retries (see [`transient`]).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable { source, .. } => {
                source.as_ref().is_none_or(transient::is_lost_connection)
            }
            Error::Database { code, source, .. } => {
                code.is_some_and(transient::is_transient_code)
                    || source
                        .as_ref()
                        .is_some_and(transient::is_transient_driver_error)
            }
            _ => false,
        }
    }
}

impl From<mongodb::error::Error> for Error {
    fn from(error: mongodb::error::Error) -> Self {
        use mongodb::error::ErrorKind;
        if let Some(reason) = transient::unreachable_reason(&error) {
            return Error::Unreachable {
                reason,
                source: Some(error),
            };
        }
        let code = match &*error.kind {
            ErrorKind::Command(command) => Some(command.code),
            ErrorKind::Write(mongodb::error::WriteFailure::WriteError(write)) => Some(write.code),
            ErrorKind::Write(mongodb::error::WriteFailure::WriteConcernError(concern)) => {
                Some(concern.code)
            }
            ErrorKind::InsertMany(failure) => failure
                .write_errors
                .as_deref()
                .and_then(|errors| errors.first())
                .map(|first| first.code)
                .or(failure.write_concern_error.as_ref().map(|c| c.code)),
            _ => None,
        };
        Error::Database {
            code,
            message: error.to_string(),
            source: Some(error),
        }
    }
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

/// The last failure of an [`Error::RetriesExhausted`], in its message.
struct Last<'a>(&'a Option<Box<Error>>);

impl fmt::Display for Last<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(last) => write!(f, "; the last failure: {last}"),
            None => f.write_str(" under write contention"),
        }
    }
}

/// An [`Error::Database`]'s message: the server's code before its words.
struct DatabaseMessage<'a>(Option<i32>, &'a str);

impl fmt::Display for DatabaseMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(code) => write!(f, "the server failed with code {code}: {}", self.1),
            None => write!(f, "the database failed: {}", self.1),
        }
    }
}

/// What an [`Error::NotFound`] or an [`Error::AlreadyExists`] names. Displayed as the words of
/// the error's message (`ParentComment` as "parent comment").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Entity {
    /// A post of the feed.
    Post,
    /// A user: of the follow graph, the feed or the delivery.
    User,
    /// A user's extended profile in the feed.
    ExtendedUser,
    /// A username, unique among the feed's users.
    Username,
    /// A group of the follow graph.
    Group,
    /// A discussion comments are posted to.
    Discussion,
    /// A comment, named by its link.
    Comment,
    /// The comment a reply answers, named by its link.
    ParentComment,
    /// The propagation of a user's new username to the copies of their chunk.
    Propagation,
    /// The shared recipient list of a message with many recipients.
    RecipientList,
    /// A group of a recipient's notifications.
    Notification,
    /// A message in an inbox: one the owner never received, deleted, or pruned; or one that
    /// was retracted.
    Message,
    /// A comment that was deleted: an edit, a delete or a vote named it.
    DeletedComment,
}

impl Entity {
    /// The words for it in error messages (`"parent comment"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Entity::Post => "post",
            Entity::User => "user",
            Entity::ExtendedUser => "extended user",
            Entity::Username => "username",
            Entity::Group => "group",
            Entity::Discussion => "discussion",
            Entity::Comment => "comment",
            Entity::ParentComment => "parent comment",
            Entity::Propagation => "propagation",
            Entity::RecipientList => "recipient list",
            Entity::Notification => "notification",
            Entity::Message => "message",
            Entity::DeletedComment => "deleted comment",
        }
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The document an [`Error::Decode`] names, in its message.
struct DocumentId<'a>(&'a Option<Box<Bson>>);

impl fmt::Display for DocumentId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(id) => write!(f, "the document with _id {id}"),
            None => f.write_str("a document without _id"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use bson::doc;
    use bson::oid::ObjectId;

    use super::*;
    use crate::update_batch::{insert_failure, InsertFailure};

    #[test]
    fn entities_read_as_the_words_they_replace() {
        let words = [
            (Entity::Post, "post"),
            (Entity::User, "user"),
            (Entity::ExtendedUser, "extended user"),
            (Entity::Username, "username"),
            (Entity::Group, "group"),
            (Entity::Discussion, "discussion"),
            (Entity::Comment, "comment"),
            (Entity::ParentComment, "parent comment"),
            (Entity::Propagation, "propagation"),
            (Entity::RecipientList, "recipient list"),
            (Entity::Message, "message"),
        ];
        for (entity, text) in words {
            assert_eq!(entity.to_string(), text);
        }
        let missing = Error::NotFound {
            what: Entity::ParentComment,
            id: "0a1b/2c3d".into(),
        };
        assert_eq!(missing.to_string(), "unknown parent comment `0a1b/2c3d`");
        assert!(missing.is_not_found() && !missing.is_invalid_input());
        let taken = Error::AlreadyExists {
            what: Entity::Username,
            id: "ann".into(),
        };
        assert_eq!(taken.to_string(), "username `ann` already exists");
        assert!(taken.is_already_exists() && !taken.is_not_found());
    }

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

    /// A transient `insert` failure as the driver reports it: the `Database` error built from it keeps the
    /// driver's error as its source, and is classified by its code as before.
    #[test]
    fn a_write_keeps_the_drivers_error_as_its_source() {
        let failure: mongodb::error::InsertManyError = bson::from_document(doc! {
            "writeErrors": [
                { "index": 0, "code": 11000, "errmsg": "E11000 duplicate key error" },
                { "index": 1, "code": 112, "errmsg": "WriteConflict" },
            ],
        })
        .expect("an insert failure");
        let driver = mongodb::error::Error::from(mongodb::error::ErrorKind::InsertMany(failure));
        let InsertFailure::Transient(error) = insert_failure(driver) else {
            panic!("a write conflict is transient");
        };
        assert_eq!(
            error.to_string(),
            "the server failed with code 112: WriteConflict"
        );
        assert_eq!(error.code(), Some(112));
        assert!(error.is_retryable());
        let source = error.source().expect("the driver's error");
        let driver = source
            .downcast_ref::<mongodb::error::Error>()
            .expect("a driver error");
        assert!(matches!(
            &*driver.kind,
            mongodb::error::ErrorKind::InsertMany(_)
        ));

        // Read from a command's reply (`writeErrors`), with no driver error: the same
        // classification.
        let from_reply = Error::from_reply(112, "WriteConflict");
        assert!(from_reply.source().is_none());
        assert!(from_reply.is_retryable());
        assert_eq!(from_reply.code(), Some(112));
    }

    #[test]
    fn a_driver_error_has_the_servers_code() {
        let command: mongodb::error::CommandError = bson::from_document(doc! {
            "ok": 0.0, "code": 13, "codeName": "Unauthorized", "errmsg": "not authorized",
        })
        .expect("a command error");
        let error = Error::from(mongodb::error::Error::from(
            mongodb::error::ErrorKind::Command(command),
        ));
        assert!(matches!(error, Error::Database { .. }), "{error}");
        assert_eq!(error.code(), Some(13));
        assert_eq!(Error::from(Invalid::NoRecipients).code(), None);
    }

    #[derive(Debug, serde::Deserialize)]
    struct Stored {
        slug: String,
    }

    /// A stored document that does not decode names its collection and `_id`.
    #[test]
    fn a_decode_error_names_the_collection_and_the_id() {
        let id = ObjectId::new();
        let good = doc! { "_id": id, "slug": "0a1b" };
        let stored: Stored = crate::bson_ext::decode("comments", good).unwrap();
        assert_eq!(stored.slug, "0a1b");
        let corrupt = doc! { "_id": id, "slug": 5 };
        let error = crate::bson_ext::decode::<Stored>("comments", corrupt).unwrap_err();
        assert!(
            matches!(
                &error,
                Error::Decode { collection, id: Some(found), .. }
                    if collection == "comments" && **found == Bson::ObjectId(id)
            ),
            "{error:?}"
        );
        let text = error.to_string();
        let named =
            format!("could not decode the document with _id ObjectId(\"{id}\") in `comments`: ");
        assert!(text.starts_with(&named), "{text}");
        let source = error.source().expect("the decoder's error");
        assert!(source.downcast_ref::<bson::de::Error>().is_some());
        assert!(!error.is_retryable() && !error.is_invalid_input());

        let error = crate::bson_ext::decode::<Stored>("comments", doc! { "slug": 5 }).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("could not decode a document without _id in `comments`: "),
            "{error}"
        );
        let error =
            crate::bson_ext::corrupt("posts", Some(Bson::from("p1")), "a post lacks created");
        assert_eq!(
            error.to_string(),
            "could not decode the document with _id \"p1\" in `posts`: a post lacks created"
        );
    }

    #[test]
    fn a_handler_error_keeps_the_applications_error() {
        let job: crate::jobs::Job = bson::from_document(doc! {
            "_id": ObjectId::new(), "kind": "send_email", "payload": {}, "attempts": 0,
        })
        .expect("a job");
        let error = job.error(std::io::Error::other("mail server down"));
        assert!(matches!(&error, Error::Handler { kind, .. } if kind == "send_email"));
        assert_eq!(
            error.to_string(),
            "job `send_email` failed: mail server down"
        );
        let source = error.source().expect("the handler's error");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert!(!error.is_retryable() && !error.is_invalid_input());
        let error = job.error("no such template");
        assert_eq!(
            error.to_string(),
            "job `send_email` failed: no such template"
        );
    }
}
