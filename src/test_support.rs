//! Not a stable part of the API: what this repository's test lab needs from the inside of the
//! crate, to check that every store refuses a cursor it did not make and to size its checks.
//! Hidden from the docs; may change in any release.

use crate::page::Cursor;

/// The most keys one locked round of a store's writes takes, where writers take turns.
pub const LOCKED_ROUND: usize = crate::backend::LOCKED_ROUND;

/// A cursor with `tag` and `fields`, bound to `owner`'s inbox.
pub fn inbox_cursor(tag: &str, owner: &str, fields: &[&str]) -> Cursor {
    Cursor::new(tag, crate::inbox::cursor::scope(owner), fields)
}

/// A cursor with `tag` and `fields`, bound to `discussion`'s pages.
pub fn discussion_cursor(tag: &str, discussion: &str, fields: &[&str]) -> Cursor {
    Cursor::new(tag, crate::comments::cursor::discussion(discussion), fields)
}

/// One error of each kind whose variant an application cannot build itself (its fields are
/// non-exhaustive), keyed by the variant's name: for tests of an application's mapping of
/// errors (to HTTP statuses, say), such as this repository's example web service.
pub fn errors_of_each_kind() -> Vec<(&'static str, crate::Error)> {
    use crate::error::{Entity, Error, Limit};
    use std::time::Duration;
    vec![
        (
            "NotFound",
            Error::NotFound {
                what: Entity::Discussion,
                id: "d".into(),
            },
        ),
        (
            "AlreadyExists",
            Error::AlreadyExists {
                what: Entity::Username,
                id: "ann".into(),
            },
        ),
        (
            "Conflict",
            Error::Conflict {
                what: Entity::Message,
                id: "k".into(),
                reason: "other payload",
            },
        ),
        (
            "Unsupported",
            Error::Unsupported {
                feature: "replies",
                limit: Limit::Strategy,
                reason: "flat".into(),
            },
        ),
        (
            "Unreachable",
            Error::Unreachable {
                reason: "no server".into(),
                source: None,
            },
        ),
        (
            "RetriesExhausted",
            Error::RetriesExhausted {
                operation: "like",
                attempts: 9,
                last: None,
            },
        ),
        (
            "Timeout",
            Error::Timeout {
                what: "drain",
                waited: Duration::from_secs(1),
            },
        ),
        (
            "Database",
            Error::Database {
                code: Some(13),
                message: "not authorized".into(),
                source: None,
            },
        ),
        (
            "InvalidConfig",
            Error::InvalidConfig {
                reason: "bad".into(),
            },
        ),
        (
            "Precondition",
            Error::Precondition {
                reason: "not yet".into(),
            },
        ),
    ]
}
