//! The crate's error type, and [`Entity`], what a [`Error::NotFound`] or [`Error::AlreadyExists`]
//! names.

use std::fmt;

use bson::Bson;

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

    /// Required text was empty or only whitespace: a user id (an inbox's sender, recipient or
    /// owner, a comment's author, a follower, a feed's user) or any other (a group or discussion
    /// id, a username, a comment's text, a job's kind). Every module refuses it with this
    /// variant, before anything is written.
    #[error("{what} must not be blank")]
    Blank {
        /// What was blank: for a user id, its role (`"sender"`, `"recipient"`, `"owner"`,
        /// `"user"`, `"author"`); otherwise the field (`"group id"`, `"discussion id"`,
        /// `"username"`, `"text"`, `"title and body"`, `"media url"`, `"search terms"`,
        /// `"job kind"`).
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

    /// Something to be stored (a message, a post, a comment, a recipient list) encodes to more
    /// bytes than the store accepts, or than the document that would hold it can take.
    #[error("{what} is {size} bytes, larger than the {limit} bytes allowed")]
    TooLarge {
        /// What was too large (`"message"`, `"post"`, `"comment"`, `"recipient list"`).
        what: &'static str,
        /// Encoded size in bytes.
        size: usize,
        /// Largest encoded size accepted.
        limit: usize,
    },

    /// Something an operation names does not exist (a post, a user, a discussion, a comment).
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

    /// A user named themselves where the operation needs another user: blocking themselves, or
    /// dismissing themselves from their recommendations. (Following themselves is
    /// [`Error::SelfFollow`].)
    #[error("user `{user}` cannot {action} themselves")]
    SelfAction {
        /// The user.
        user: String,
        /// What they tried: `"block"` or `"dismiss"`.
        action: &'static str,
    },

    /// A direct follow between two users one of whom has blocked the other
    /// ([`FollowGraph::block`](crate::graph::FollowGraph::block)): refused before anything was
    /// written, until the block is lifted.
    #[error("`{blocked}` is blocked by `{by}`: no direct follow between them")]
    Blocked {
        /// Who blocked.
        by: String,
        /// Whom.
        blocked: String,
    },

    /// A comment link (slug path or position path) is not one this strategy makes.
    #[error("invalid comment link `{link}`: {reason}")]
    InvalidLink {
        /// The link as given.
        link: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A user edited or retracted a message someone else sent. Nothing was written.
    #[error("`{user}` did not send message `{id}`, so cannot change it")]
    NotSender {
        /// Who tried to change the message.
        user: String,
        /// The message's id.
        id: String,
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

    /// A comment vote other than up (1) or down (-1), or 0 where a retraction is meant: what
    /// [`Vote::from_dir`](crate::comments::Vote::from_dir) says of a value that came from outside
    /// (a request's `dir`).
    #[error("invalid vote {value}: a vote is 1 (up) or -1 (down), or 0 to take it back")]
    InvalidVote {
        /// The value as given.
        value: i64,
    },

    /// An edit, delete or vote named a comment that was already deleted.
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
    ///
    /// `code` and `message` are the server's. Where the driver reported the failure, its error
    /// is the [`source`](std::error::Error::source); where the crate read it from a command's
    /// reply itself (an entry of an `update` command's `writeErrors`, or its
    /// `writeConcernError`), there is no driver error and `source` is `None`.
    #[error("write failed with code {code}: {message}")]
    Write {
        /// The server's error code.
        code: i32,
        /// The server's error message.
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
    /// own; build it with [`Error::handler`]. The job queue records the text on the job and
    /// runs the job again later.
    #[error("job `{kind}` failed: {source}")]
    Handler {
        /// The kind of the job that failed.
        kind: String,
        /// The handler's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

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

    /// Whether the caller's input was refused before anything was written: an empty, repeated
    /// or malformed value, a cursor or link this store did not make, a page limit out of range,
    /// something too large or too deep, a user following, blocking or dismissing themselves, a
    /// change to a message by someone other than its sender. Calling again with the same input
    /// fails the same way.
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
                | Error::Blank { .. }
                | Error::InvalidCursor { .. }
                | Error::InvalidPageLimit { .. }
                | Error::TooLarge { .. }
                | Error::SelfFollow { .. }
                | Error::SelfAction { .. }
                | Error::InvalidLink { .. }
                | Error::InvalidVote { .. }
                | Error::ThreadTooDeep { .. }
                | Error::NotSender { .. }
        )
    }

    /// The server's error code, where the server refused the operation: the `code` of an
    /// [`Error::Write`], or of a command failure, write error or write concern error the driver
    /// reported ([`Error::Database`]). `None` for every other error.
    ///
    /// ```
    /// let error = mongo_social::Error::Write {
    ///     code: 11000,
    ///     message: "E11000 duplicate key error".into(),
    ///     source: None,
    /// };
    /// assert_eq!(error.code(), Some(11000));
    /// ```
    pub fn code(&self) -> Option<i32> {
        use mongodb::error::{ErrorKind, WriteFailure};
        match self {
            Error::Write { code, .. } => Some(*code),
            Error::Database(error) => match &*error.kind {
                ErrorKind::Command(command) => Some(command.code),
                ErrorKind::Write(WriteFailure::WriteError(write)) => Some(write.code),
                ErrorKind::Write(WriteFailure::WriteConcernError(concern)) => Some(concern.code),
                _ => None,
            },
            _ => None,
        }
    }

    /// An [`Error::Handler`] for `job`: how an application's
    /// [`JobHandler`](crate::jobs::JobHandler) reports a failure of its own.
    ///
    /// ```
    /// use mongo_social::jobs::{Job, JobHandler};
    /// use mongo_social::Error;
    ///
    /// #[derive(Debug)]
    /// struct Greet;
    ///
    /// #[async_trait::async_trait]
    /// impl JobHandler for Greet {
    ///     async fn handle(&self, job: &Job) -> mongo_social::Result<()> {
    ///         let who = job.payload.get_str("who").map_err(|error| Error::handler(job, error))?;
    ///         println!("hello, {who}");
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn handler(
        job: &crate::jobs::Job,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Handler {
            kind: job.kind.clone(),
            source: source.into(),
        }
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
        let blank = Error::Blank { what: "owner" };
        assert_eq!(blank.to_string(), "owner must not be blank");
        let too_large = Error::TooLarge {
            what: "message",
            size: 400_000,
            limit: 335_544,
        };
        assert_eq!(
            too_large.to_string(),
            "message is 400000 bytes, larger than the 335544 bytes allowed"
        );
        for error in [blank, too_large] {
            assert!(error.is_invalid_input() && !error.is_retryable(), "{error}");
        }
    }

    /// A transient `insert` failure as the driver reports it: the `Write` built from it keeps the
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
            "write failed with code 112: WriteConflict"
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
        let from_reply = Error::Write {
            code: 112,
            message: "WriteConflict".into(),
            source: None,
        };
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
        assert!(matches!(error, Error::Database(_)), "{error}");
        assert_eq!(error.code(), Some(13));
        assert_eq!(Error::NoRecipients.code(), None);
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
        let error = Error::handler(&job, std::io::Error::other("mail server down"));
        assert!(matches!(&error, Error::Handler { kind, .. } if kind == "send_email"));
        assert_eq!(
            error.to_string(),
            "job `send_email` failed: mail server down"
        );
        let source = error.source().expect("the handler's error");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert!(!error.is_retryable() && !error.is_invalid_input());
        let error = Error::handler(&job, "no such template");
        assert_eq!(
            error.to_string(),
            "job `send_email` failed: no such template"
        );
    }
}
