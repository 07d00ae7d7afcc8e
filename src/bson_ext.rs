//! Reading numbers out of stored documents, whatever numeric type the server kept them as.

use bson::{Bson, Document};

/// The integer at `key`, from an `Int32`, `Int64` or `Double`; `None` when missing or not a
/// number.
pub(crate) fn integer(document: &Document, key: &str) -> Option<i64> {
    match document.get(key)? {
        Bson::Int32(v) => Some(i64::from(*v)),
        Bson::Int64(v) => Some(*v),
        Bson::Double(v) => Some(*v as i64),
        _ => None,
    }
}

/// The count at `key`: [`integer`], 0 when missing, never negative.
pub(crate) fn count(document: &Document, key: &str) -> u64 {
    integer(document, key).unwrap_or(0).max(0) as u64
}
