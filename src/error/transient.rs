//! Which failures may pass by themselves, and which the request caused.
//!
//! The library retries (under a store's [`RetryPolicy`](crate::retry::RetryPolicy)) only what another
//! attempt may not meet:
//!
//! - **a lost connection**: an I/O error, a cleared connection pool, or a server whose own
//!   database is restarting, as the server's family reports it (the engines on PostgreSQL pass
//!   on its connection failures: see `src/server/family/`);
//! - **a transient server error**: the codes of stepped-down or shutting-down nodes, write
//!   conflicts, lock and time-limit timeouts ([`TRANSIENT_CODES`]), the transient codes of a
//!   server family (PostgreSQL's serialization failures and deadlocks, as the engines on it
//!   report them), and errors labelled `RetryableWriteError`, `TransientTransactionError` or
//!   `RetryableError`.
//!
//! It does not retry what the request itself caused: an input error (refused before anything is
//! sent, sizes and id lengths included, so no request is ever larger than a server takes: a
//! server that closes the connection on an oversized request would otherwise look like an
//! outage), any other server error (a duplicate key, a document too
//! large, a bad value, an internal error that does not say its database is gone), and a failed
//! server selection, after which the driver has already waited its whole
//! `serverSelectionTimeoutMS` for a server (that timeout is the client's own bound on waiting
//! for one; see [`RetryPolicy::apply_to`](crate::retry::RetryPolicy::apply_to)). Background work (a
//! job worker finishing its jobs, a lock given back) waits that out too, within its budget.

use bson::{Bson, Document};

pub use crate::server::family::errors::sqlstate;
use crate::server::family::errors::{is_lost_backend, server_says_transient};

/// Server error codes that mean "try again": the node stepped down, is shutting down or was
/// unreachable, a write conflicted with another, a lock or time limit ran out. The drivers'
/// retryable-read/write sets plus `WriteConflict` and `LockTimeout`.
pub const TRANSIENT_CODES: &[(i32, &str)] = &[
    (6, "HostUnreachable"),
    (7, "HostNotFound"),
    (24, "LockTimeout"),
    (89, "NetworkTimeout"),
    (91, "ShutdownInProgress"),
    (112, "WriteConflict"),
    (189, "PrimarySteppedDown"),
    (262, "ExceededTimeLimit"),
    (9001, "SocketException"),
    (10107, "NotWritablePrimary"),
    (11600, "InterruptedAtShutdown"),
    (11602, "InterruptedDueToReplStateChange"),
    (13435, "NotPrimaryNoSecondaryOk"),
    (13436, "NotPrimaryOrSecondary"),
];

/// Error labels that mark an error as transient whatever its code.
pub const TRANSIENT_LABELS: &[&str] = &[
    "RetryableWriteError",
    "TransientTransactionError",
    "RetryableError",
];

/// Whether a server error code is transient: one of [`TRANSIENT_CODES`], or one that a server
/// family reports for a transient failure of its own (PostgreSQL's serialization failures,
/// deadlocks and lost connections, as the engines over PostgreSQL report them).
pub fn is_transient_code(code: i32) -> bool {
    TRANSIENT_CODES.iter().any(|(known, _)| *known == code) || server_says_transient(code)
}

/// Whether one entry of a reply's `writeErrors` (or its `writeConcernError`) is transient.
pub(crate) fn is_transient_write_error(error: &Document) -> bool {
    let code = match error.get("code") {
        Some(Bson::Int32(code)) => Some(*code),
        Some(Bson::Int64(code)) => i32::try_from(*code).ok(),
        Some(Bson::Double(code)) => Some(*code as i32),
        _ => None,
    };
    let labelled = error.get_array("errorLabels").is_ok_and(|labels| {
        labels
            .iter()
            .any(|label| matches!(label, Bson::String(l) if TRANSIENT_LABELS.contains(&l.as_str())))
    });
    let message = error.get_str("errmsg").unwrap_or("");
    labelled || code.is_some_and(|code| is_transient_code(code) || is_lost_backend(code, message))
}

/// Why a driver error means the database cannot be reached now, in words; `None` when the
/// server answered with an error of its own.
pub(crate) fn unreachable_reason(error: &mongodb::error::Error) -> Option<String> {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*error.kind {
        ErrorKind::ServerSelection { .. } => {
            Some("no server was selected within the client's server selection timeout".to_owned())
        }
        ErrorKind::Io(io) => Some(format!("the connection failed: {io}")),
        ErrorKind::ConnectionPoolCleared { .. } => {
            Some("the connection pool was cleared after a network error".to_owned())
        }
        ErrorKind::Command(command) if is_lost_backend(command.code, &command.message) => Some(
            format!("the server's database is unavailable: {}", command.message),
        ),
        ErrorKind::Write(WriteFailure::WriteError(write))
            if is_lost_backend(write.code, &write.message) =>
        {
            Some(format!(
                "the server's database is unavailable: {}",
                write.message
            ))
        }
        _ => None,
    }
}

/// Whether an [`Error::Unreachable`](super::Error::Unreachable)'s driver error is a connection
/// lost (retried) rather than a failed server selection (final: the driver waited already).
pub(crate) fn is_lost_connection(error: &mongodb::error::Error) -> bool {
    !matches!(
        *error.kind,
        mongodb::error::ErrorKind::ServerSelection { .. }
    )
}

/// Whether an error from the driver is transient: a transient label, or a transient code (of
/// the command, of any write error, or of the write concern error). Connection failures are
/// [`Error::Unreachable`](super::Error::Unreachable), classified by [`is_lost_connection`].
pub(crate) fn is_transient_driver_error(error: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    if TRANSIENT_LABELS
        .iter()
        .any(|label| error.contains_label(label))
    {
        return true;
    }
    match &*error.kind {
        ErrorKind::Io(_) | ErrorKind::ConnectionPoolCleared { .. } => true,
        ErrorKind::Command(command) => is_transient_code(command.code),
        ErrorKind::Write(WriteFailure::WriteError(write)) => is_transient_code(write.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(concern)) => {
            is_transient_code(concern.code)
        }
        // Transient only if every error is: a duplicate key next to a deadlock is not retried
        // blindly, the caller sorts it out.
        ErrorKind::InsertMany(failure) => {
            let writes = failure.write_errors.as_deref().unwrap_or_default();
            let concern = failure.write_concern_error.as_ref();
            (!writes.is_empty() || concern.is_some())
                && writes.iter().all(|write| is_transient_code(write.code))
                && concern.is_none_or(|concern| is_transient_code(concern.code))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::server::family::errors::INTERNAL_ERROR;
    use bson::doc;

    /// A server family's own transient codes count (a deadlock's SQLSTATE, packed as the
    /// engines on PostgreSQL pack it); MongoDB's small codes do not.
    #[test]
    fn a_familys_transient_codes_are_transient() {
        assert!(is_transient_code(16908292));
        // 40001, serialization failure: '4' + '1' << 24.
        assert!(is_transient_code(4 + (1 << 24)));
        assert!(!is_transient_code(11000) && !is_transient_code(INTERNAL_ERROR));
    }

    /// Replies as servers send them: `writeErrors` entries of an `update` command, and whole
    /// command failures.
    #[test]
    fn classifies_recorded_write_errors() {
        for (code, name) in TRANSIENT_CODES {
            let entry = doc! { "index": 0, "code": *code, "errmsg": *name };
            assert!(is_transient_write_error(&entry), "{code} {name}");
            let as_error = Error::from_reply(*code, *name);
            assert!(as_error.is_retryable(), "{code} {name}");
        }
        // DocumentDB over PostgreSQL, two senders crossing (FerretDB 2.x).
        let deadlock = doc! {
            "n": 3, "nModified": 3,
            "writeErrors": [{ "index": 2, "code": 16908292, "errmsg": "deadlock detected" }],
            "ok": 1.0,
        };
        let entry = deadlock.get_array("writeErrors").unwrap()[0]
            .as_document()
            .unwrap();
        assert!(is_transient_write_error(entry));
        let labelled = doc! { "code": 2, "errmsg": "x", "errorLabels": ["RetryableWriteError"] };
        assert!(is_transient_write_error(&labelled));
        for (code, name) in [
            (11000, "E11000 duplicate key error"),
            (2, "BadValue"),
            (9, "FailedToParse"),
            (10334, "BSONObjectTooLarge"),
            (17419, "document too large"),
            (13, "Unauthorized"),
            (121, "DocumentValidationFailure"),
            (1, "internal error: invalid document"),
        ] {
            let entry = doc! { "index": 0, "code": code, "errmsg": name };
            assert!(!is_transient_write_error(&entry), "{code} {name}");
            assert!(!Error::from_reply(code, name).is_retryable());
        }
    }

    fn from_reply(reply: Document) -> mongodb::error::Error {
        let command: mongodb::error::CommandError =
            bson::from_document(reply).expect("a command error");
        mongodb::error::ErrorKind::Command(command).into()
    }

    /// Driver errors built from recorded command replies.
    #[test]
    fn classifies_recorded_command_failures() {
        for (code, name) in TRANSIENT_CODES {
            let error = from_reply(doc! { "ok": 0.0, "code": *code, "codeName": *name,
            "errmsg": "recorded" });
            assert!(is_transient_driver_error(&error), "{code} {name}");
            assert!(Error::from(error).is_retryable(), "{code} {name}");
        }
        // Labels as a reply carries them (`errorLabels`), whatever the code.
        for label in TRANSIENT_LABELS {
            let reply = doc! { "ok": 0.0, "code": 251, "codeName": "NoSuchTransaction",
            "errmsg": "recorded", "errorLabels": [*label] };
            assert!(is_transient_write_error(&reply), "{label}");
        }
        let unlabelled = doc! { "ok": 0.0, "code": 251, "errorLabels": ["NoWritesPerformed"] };
        assert!(!is_transient_write_error(&unlabelled));
        for (code, name) in [
            (11000, "DuplicateKey"),
            (2, "BadValue"),
            (26, "NamespaceNotFound"),
        ] {
            let error =
                from_reply(doc! { "ok": 0.0, "code": code, "codeName": name, "errmsg": "x" });
            assert!(!is_transient_driver_error(&error), "{code} {name}");
            assert!(!Error::from(error).is_retryable(), "{code} {name}");
        }
        let reset = mongodb::error::Error::from(mongodb::error::ErrorKind::Io(
            std::sync::Arc::new(std::io::ErrorKind::ConnectionReset.into()),
        ));
        let reset = Error::from(reset);
        assert!(reset.is_unreachable() && reset.is_retryable() && reset.is_transient());
        let unsupported: mongodb::error::Error =
            mongodb::error::ErrorKind::SessionsNotSupported.into();
        assert!(!Error::from(unsupported).is_retryable());
    }

    /// What FerretDB 2.5 answered while the PostgreSQL under it restarted (recorded): a lost
    /// backend, retried like an outage; other internal errors are final.
    #[test]
    fn a_restarting_postgresql_is_an_outage() {
        for message in [
            "unexpected EOF",
            "FATAL: the database system is not yet accepting connections (SQLSTATE 57P03)",
            "failed to connect to `user=postgres database=postgres`: /tmp/x/.s.PGSQL.5432 \
             (/tmp/x): dial error: dial unix /tmp/x/.s.PGSQL.5432: connect: connection refused",
        ] {
            let error = Error::from(from_reply(doc! {
                "ok": 0.0, "code": 1, "codeName": "InternalError", "errmsg": message,
            }));
            assert!(
                error.is_unreachable() && error.is_transient(),
                "{message}: {error:?}"
            );
        }
        let encoded = Error::from(mongodb::error::Error::from(
            mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteError(
                bson::from_document(doc! {
                    "code": 100663808,
                    "errmsg": "Connection refused\n\tIs the server running on that host?",
                })
                .expect("a write error"),
            )),
        ));
        assert!(
            encoded.is_unreachable() && encoded.is_transient(),
            "{encoded:?}"
        );
        let internal = Error::from(from_reply(doc! {
            "ok": 0.0, "code": 1, "codeName": "InternalError",
            "errmsg": "invalid input syntax for type bson",
        }));
        assert!(
            !internal.is_unreachable() && !internal.is_retryable(),
            "{internal:?}"
        );
    }
}
