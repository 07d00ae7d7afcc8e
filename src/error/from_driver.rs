//! The crate's [`Error`] from the driver's.

use super::{transient, Error};

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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use bson::doc;

    use super::*;
    use crate::backend::update_batch::{insert_failure, InsertFailure};
    use crate::error::Invalid;

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
}
