//! Reading numbers and times out of stored documents, whatever numeric type the server kept
//! them as; times that must not go backwards; decoding stored documents, with errors that name
//! the document; ids derived from other ids.

use std::fmt;

use bson::oid::ObjectId;
use bson::{Bson, Document};
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

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

/// The strings in `document`'s array `key` (other elements left out); none when it is missing.
pub(crate) fn strings(document: &Document, key: &str) -> Vec<String> {
    document
        .get_array(key)
        .map(|values| {
            values
                .iter()
                .filter_map(Bson::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
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

/// Decodes `document`, read from `collection`, as a `T`: the one way the crate decodes stored
/// documents, so a failure is an [`Error::Decode`] naming the collection and the `_id`.
pub(crate) fn decode<T: DeserializeOwned>(collection: &str, document: Document) -> Result<T> {
    let id = document.get("_id").cloned();
    decode_with_id(collection, id, document)
}

/// [`decode`] for a value that is part of (or was rewritten from) the stored document `id` of
/// `collection`: an array of a discussion's comments, a job's payload, an entry whose `_id` was
/// renamed.
pub(crate) fn decode_with_id<T: DeserializeOwned>(
    collection: &str,
    id: Option<Bson>,
    value: impl Into<Bson>,
) -> Result<T> {
    bson::from_bson(value.into()).map_err(|source| Error::Decode {
        collection: collection.to_owned(),
        id: id.map(Box::new),
        source,
    })
}

/// An [`Error::Decode`] for the stored document `id` of `collection`, which lacks what the crate
/// reads by hand (`reason`: "a subscription without a valid `owner`").
pub(crate) fn corrupt(collection: &str, id: Option<Bson>, reason: impl fmt::Display) -> Error {
    Error::Decode {
        collection: collection.to_owned(),
        id: id.map(Box::new),
        source: serde::de::Error::custom(reason),
    }
}

/// A stable id for the copy of the document `id` (a message) keyed by `key` (a recipient, a batch's first
/// recipient): the message's timestamp, then 64 bits of FNV-1a over the message id and `key`.
/// The same inputs always give the same id, so inserting a copy twice is refused by `_id`.
pub(crate) fn derived_id(id: ObjectId, key: &str) -> ObjectId {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes().iter().chain(key.as_bytes()) {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut bytes = [0_u8; 12];
    bytes[..4].copy_from_slice(&id.bytes()[..4]);
    bytes[4..].copy_from_slice(&hash.to_be_bytes());
    ObjectId::from_bytes(bytes)
}
