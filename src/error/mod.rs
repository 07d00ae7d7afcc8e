//! The crate's error type: [`Error`], one variant per kind of failure; [`Invalid`] and
//! [`Forbidden`], the reasons of its input and permission kinds; [`Entity`], what a
//! [`Error::NotFound`] or [`Error::AlreadyExists`] names; and, in [`transient`], how a failure
//! that may pass by itself is told from one the request caused.

mod entity;
mod forbidden;
mod from_driver;
mod invalid;
mod limit;
pub mod transient;

use std::fmt;

use bson::Bson;

pub use crate::validate::MAX_ID_BYTES;
pub use entity::Entity;
pub use forbidden::Forbidden;
pub use invalid::Invalid;
pub use limit::Limit;

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
/// | [`Precondition`](Error::Precondition) | the operation needs a state its subject is not in (a migration finished before its copy is done) | later, once it is |
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
    #[non_exhaustive]
    InvalidInput {
        /// What was wrong with the input.
        #[from]
        reason: Invalid,
    },

    /// A store was configured with a value it cannot work with.
    #[error("invalid configuration: {reason}")]
    #[non_exhaustive]
    InvalidConfig {
        /// What is wrong with the configuration.
        reason: String,
    },

    /// Something an operation names does not exist (a post, a user, a discussion, a comment), or
    /// no longer does ([`Entity::DeletedComment`]).
    #[error("unknown {what} `{id}`")]
    #[non_exhaustive]
    NotFound {
        /// What kind of thing was looked up.
        what: Entity,
        /// The id that was not found.
        id: String,
    },

    /// Something to be created exists already (a user id, a username).
    #[error("{what} `{id}` already exists")]
    #[non_exhaustive]
    AlreadyExists {
        /// What kind of thing clashed ([`Entity::User`], [`Entity::Username`]).
        what: Entity,
        /// The clashing id or value.
        id: String,
    },

    /// A create repeated with the same caller-chosen id (an idempotency key) but other content:
    /// the first create stands, and nothing was written.
    #[error("{what} `{id}` was created already with other content: {reason}")]
    #[non_exhaustive]
    Conflict {
        /// What was created.
        what: Entity,
        /// The caller-chosen id.
        id: String,
        /// What differs.
        reason: &'static str,
    },

    /// The operation needs its subject in another state first (a migration cut over before
    /// every owner is copied, started into a target that holds messages); nothing was
    /// changed.
    #[error("{reason}")]
    #[non_exhaustive]
    Precondition {
        /// What state is needed, and what it is in.
        reason: String,
    },

    /// The user may not do this; nothing was written. [`Forbidden`] says why.
    #[error(transparent)]
    #[non_exhaustive]
    Forbidden {
        /// Why the user may not.
        #[from]
        reason: Forbidden,
    },

    /// The server lacks something an operation needs, or the store's strategy does not offer it.
    #[error("{feature} is not supported by this {limit}: {reason}")]
    #[non_exhaustive]
    Unsupported {
        /// The missing feature.
        feature: &'static str,
        /// Whether the server or the strategy lacks it.
        limit: Limit,
        /// Why it is unavailable.
        reason: String,
    },

    /// The database could not be reached, or the connection to it was lost, and did not come
    /// back within the store's [`RetryPolicy`](crate::retry::RetryPolicy): no server answered within
    /// the client's server selection timeout, a connection failed, or the database behind the
    /// server (PostgreSQL, for the engines built on it) was restarting. Every operation of every store reports an outage this way.
    /// A write may have been applied before the connection was lost; every write of this crate
    /// is idempotent, so calling it again completes it once.
    #[error("the database is unreachable: {reason}")]
    #[non_exhaustive]
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
    /// [`RetryPolicy`](crate::retry::RetryPolicy). It may be partly applied (a message delivered to
    /// some of its recipients); every operation the library retries is idempotent, so calling
    /// it again completes it without applying anything twice.
    #[error(
        "{operation} gave up after {attempts} attempts and may be partly applied{}",
        Last(.last)
    )]
    #[non_exhaustive]
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
    #[non_exhaustive]
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
    #[non_exhaustive]
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
    #[error("could not encode to BSON: {source}")]
    #[non_exhaustive]
    Encode {
        /// What did not encode.
        #[from]
        source: bson::ser::Error,
    },

    /// A stored document could not be decoded (for example, a payload of another type, or a
    /// field the crate needs missing): names the collection and the document's `_id`, for the
    /// application to find it.
    #[error("could not decode {} in `{collection}`: {source}", DocumentId(.id))]
    #[non_exhaustive]
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
    #[non_exhaustive]
    Handler {
        /// The kind of the job that failed.
        kind: String,
        /// The handler's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// The kind of failure, as a stable `snake_case` name of its variant, for logs, metrics and
    /// an API's error responses: `"invalid_input"`, `"invalid_config"`, `"not_found"`,
    /// `"already_exists"`, `"conflict"`, `"precondition"`, `"forbidden"`, `"unsupported"`, `"unreachable"`,
    /// `"retries_exhausted"`, `"timeout"`, `"database"`, `"encode"`, `"decode"`, `"handler"`.
    /// A name never changes meaning; a variant added later gets a new one.
    ///
    /// ```
    /// use mongo_social::{error::Invalid, Error};
    /// let error: Error = Invalid::NoRecipients.into();
    /// assert_eq!(error.kind(), "invalid_input");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidInput { .. } => "invalid_input",
            Error::InvalidConfig { .. } => "invalid_config",
            Error::NotFound { .. } => "not_found",
            Error::AlreadyExists { .. } => "already_exists",
            Error::Conflict { .. } => "conflict",
            Error::Precondition { .. } => "precondition",
            Error::Forbidden { .. } => "forbidden",
            Error::Unsupported { .. } => "unsupported",
            Error::Unreachable { .. } => "unreachable",
            Error::RetriesExhausted { .. } => "retries_exhausted",
            Error::Timeout { .. } => "timeout",
            Error::Database { .. } => "database",
            Error::Encode { .. } => "encode",
            Error::Decode { .. } => "decode",
            Error::Handler { .. } => "handler",
        }
    }

    /// Whether the failure is transient: the same call, made again a little later, may succeed
    /// ([`Error::Unreachable`], [`Error::RetriesExhausted`], [`Error::Timeout`], and a
    /// [`Error::Database`] whose code is one of the transient ones of [`transient`]). The
    /// library has already retried within its [`RetryPolicy`](crate::retry::RetryPolicy) before
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
        matches!(self, Error::InvalidInput { .. })
    }

    /// What was wrong with the input, for an [`Error::InvalidInput`].
    pub fn invalid_input(&self) -> Option<&Invalid> {
        match self {
            Error::InvalidInput { reason: invalid } => Some(invalid),
            _ => None,
        }
    }

    /// Whether something the operation names does not exist ([`Error::NotFound`]).
    ///
    /// ```no_run
    /// # async fn demo(comments: &mongo_social::PerComment) -> mongo_social::Result<()> {
    /// use mongo_social::CommentStore;
    ///
    /// let error = comments.get("d1", "no-such-comment").await.unwrap_err();
    /// assert!(error.is_not_found() && !error.is_retryable());
    /// # Ok(()) }
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
    /// ```no_run
    /// # async fn demo(db: mongo_social::mongodb::Database) -> mongo_social::Result<()> {
    /// use mongo_social::bson::{doc, Document};
    ///
    /// let users = db.collection::<Document>("users");
    /// users.insert_one(doc! { "_id": 1 }).await.map_err(mongo_social::Error::from)?;
    /// let again = users.insert_one(doc! { "_id": 1 }).await.map_err(mongo_social::Error::from);
    /// assert_eq!(again.unwrap_err().code(), Some(11000)); // a duplicate key
    /// # Ok(()) }
    /// ```
    pub fn code(&self) -> Option<i32> {
        match self {
            Error::Database { code, .. } => *code,
            _ => None,
        }
    }

    /// [`Error::NotFound`]: no `what` has the id `id`.
    pub(crate) fn not_found(what: Entity, id: impl Into<String>) -> Self {
        Error::NotFound {
            what,
            id: id.into(),
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
