//! Idempotency keys: the caller-chosen id a create may carry so that a repeat of it (a client
//! retrying a request whose response it lost) returns the first result and writes nothing.
//!
//! Every store keeps the key where its database enforces it under concurrency: an `_id` (or a
//! slug, a message id) derived from the key and its scope (the sender of a message, the
//! discussion of a comment, the author of a post, the recipient of a notification), or a record
//! whose `_id` is so derived. Each keeps, beside the key, a digest of what was created
//! ([`digest`]), so a repeat with other content is told apart and refused with
//! [`Error::Conflict`].

use bson::oid::ObjectId;
use bson::Document;
use serde::Serialize;

use crate::{error::Entity, Error, Result};

/// The field a keyed create stores its key in.
pub(crate) const KEY: &str = "idempotency_key";
/// The field a keyed create stores its content's digest in.
pub(crate) const CONTENT: &str = "content_digest";

/// Fails with [`Invalid::Blank`](crate::error::Invalid::Blank) or
/// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for a key that is not a usable id.
pub(crate) fn check(key: Option<&str>) -> Result<()> {
    match key {
        Some(key) => crate::validate::id("idempotency key", key),
        None => Ok(()),
    }
}

/// 64 bits of FNV-1a over `parts`, each followed by a zero byte, from `basis`.
fn fnv(basis: u64, parts: &[&[u8]]) -> u64 {
    let mut hash = basis;
    for part in parts {
        for byte in part.iter().chain(&[0_u8]) {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The id a create keyed `key` within `scope` is stored under: 96 bits of hash over the two,
/// the same on every call and in every process, so two attempts with one key meet on one
/// unique `_id`. (It is no timestamp: the stores keep the time of a keyed create apart.)
pub(crate) fn id(scope: &str, key: &str) -> ObjectId {
    let parts: [&[u8]; 2] = [scope.as_bytes(), key.as_bytes()];
    let high = fnv(0xcbf2_9ce4_8422_2325, &parts);
    let low = fnv(0x84_2222_3255_cbf2, &parts);
    let mut bytes = [0_u8; 12];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes()[..4]);
    ObjectId::from_bytes(bytes)
}

/// A digest of `content` as BSON (64 bits of FNV-1a over its encoding, in hex): what a keyed
/// create stores to tell a repeat with the same content from one with other content.
pub(crate) fn digest(content: &impl Serialize) -> Result<String> {
    let document = bson::to_document(&Wrapped { content })?;
    let bytes = bson::to_vec(&document)?;
    Ok(format!("{:016x}", fnv(0xcbf2_9ce4_8422_2325, &[&bytes])))
}

#[derive(Serialize)]
struct Wrapped<'a, T: Serialize> {
    content: &'a T,
}

/// `Ok` when `stored` (a keyed create as stored) holds `key` and `content`; otherwise the
/// [`Error::Conflict`] naming `what` and `key`.
pub(crate) fn same(stored: &Document, what: Entity, key: &str, content: &str) -> Result<()> {
    let conflict = |reason| Error::Conflict {
        what,
        id: key.to_owned(),
        reason,
    };
    if stored.get_str(KEY) != Ok(key) {
        return Err(conflict("its id is taken by another create"));
    }
    if stored.get_str(CONTENT) != Ok(content) {
        return Err(conflict("the content differs"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_depend_on_scope_and_key_only() {
        assert_eq!(id("ann", "k1"), id("ann", "k1"));
        assert_ne!(id("ann", "k1"), id("ann", "k2"));
        assert_ne!(id("ann", "k1"), id("bob", "k1"));
        // The separator keeps `("a", "bc")` and `("ab", "c")` apart.
        assert_ne!(id("a", "bc"), id("ab", "c"));
    }

    #[test]
    fn digests_tell_content_apart() {
        assert_eq!(digest(&("a", 1)).unwrap(), digest(&("a", 1)).unwrap());
        assert_ne!(digest(&("a", 1)).unwrap(), digest(&("a", 2)).unwrap());
    }
}
