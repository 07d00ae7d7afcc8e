//! Numbers and documents read from command replies.

use bson::{Bson, Document};

/// The documents of a cursor reply's first batch.
pub(super) fn first_batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .and_then(|cursor| cursor.get_array("firstBatch"))
        .map(|batch| {
            batch
                .iter()
                .filter_map(|item| item.as_document().cloned())
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(v) => Some(i64::from(*v)),
        Bson::Int64(v) => Some(*v),
        Bson::Double(v) if v.fract() == 0.0 => Some(*v as i64),
        _ => None,
    }
}

pub(super) fn bson_to_usize(value: &Bson) -> Option<usize> {
    match value {
        Bson::Int32(v) => usize::try_from(*v).ok(),
        Bson::Int64(v) => usize::try_from(*v).ok(),
        Bson::Double(v) if *v >= 0.0 => Some(*v as usize),
        _ => None,
    }
}
