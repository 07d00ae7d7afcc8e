//! Reading numbers and times out of stored documents, whatever numeric type the server kept
//! them as; times that must not go backwards.

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

/// The date at `key`; `None` when missing or not a date.
pub(crate) fn date(document: &Document, key: &str) -> Option<bson::DateTime> {
    document.get_datetime(key).ok().copied()
}

/// The later of two optional times.
pub(crate) fn later(
    a: Option<bson::DateTime>,
    b: Option<bson::DateTime>,
) -> Option<bson::DateTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Now, or `floor` if that is later: a stamp that never goes before the entry it follows, even
/// when that entry's writer had a clock running ahead.
pub(crate) fn now_or_after(floor: Option<bson::DateTime>) -> bson::DateTime {
    let now = bson::DateTime::now();
    floor.map_or(now, |floor| floor.max(now))
}
