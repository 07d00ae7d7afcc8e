//! Input checks shared by every module, run before anything is written: one rule for required
//! text (not empty, not only whitespace) and one error variant per kind of input.
//!
//! - Required text that is blank is [`Invalid::Blank`](crate::error::Invalid::Blank), in every module: a user id (an inbox's
//!   sender, recipient or owner; a comment's author; a follower or followee; a feed's user or
//!   author; a delivery's author or reader), named by its role, or any other (a group or
//!   discussion id, a username, a comment's text, a post's title and body, search terms, a job's
//!   kind), named by its field.
//! - An id longer than [`MAX_ID_BYTES`] is [`Invalid::TooLong`](crate::error::Invalid::TooLong),
//!   named like a blank one.
//! - Anything stored whose BSON encoding is larger than the store takes (a message, a post, a
//!   comment, a job's payload, a notification's data, a user's profile, ...) is
//!   [`Invalid::TooLarge`](crate::error::Invalid::TooLarge), named by what it is, measured by
//!   [`encoded_size`], the one size check of every store.
//! - A page size outside `1..=max` is [`Invalid::PageLimit`](crate::error::Invalid::PageLimit).
//! - A collection name MongoDB would refuse, or two roles given one collection, is
//!   [`Error::InvalidConfig`].

use serde::Serialize;

use crate::error::Invalid;
use crate::error::{Error, Result};

/// Whether `text` is empty or only whitespace.
pub(crate) fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// The longest id (of a user, a discussion, a group, a feed's user, a notification's target, a
/// job's kind) the crate accepts, in bytes of UTF-8.
///
/// Ids are keys of indexes, some of which hold two of them (a follow's owner and target) or an
/// id and a path (a comment's discussion and its `full_slug`). PostgreSQL's B-tree, under the
/// engines built on it, takes index rows of about 2,700 bytes (a row of 3,512 was refused), and
/// MongoDB index keys up to 1,024 bytes before 4.2 (docs/SERVERS.md); 512 bytes keeps every key
/// the crate makes within all of them, and is far more than any id scheme needs (a UUID is 36).
pub const MAX_ID_BYTES: usize = 512;

/// Fails with [`Invalid::Blank`] for a blank id and [`Invalid::TooLong`] for one over
/// [`MAX_ID_BYTES`], naming its role `what` (`"sender"`, `"owner"`, `"discussion id"`, ...).
pub(crate) fn id(what: &'static str, id: &str) -> Result<()> {
    non_blank(what, id)?;
    if id.len() > MAX_ID_BYTES {
        return Err(Error::InvalidInput {
            reason: Invalid::TooLong {
                what,
                bytes: id.len(),
                max: MAX_ID_BYTES,
            },
        });
    }
    Ok(())
}

/// [`id`], for a user id named by its role.
pub(crate) fn user_id(what: &'static str, user: &str) -> Result<()> {
    id(what, user)
}

/// Fails with [`Invalid::Blank`](crate::error::Invalid::Blank) (naming `field`) for blank required text.
pub(crate) fn non_blank(field: &'static str, value: &str) -> Result<()> {
    if is_blank(value) {
        return Err(Error::InvalidInput {
            reason: Invalid::Blank { what: field },
        });
    }
    Ok(())
}

/// Fails with [`Invalid::PageLimit`](crate::error::Invalid::PageLimit) unless `1 <= limit <= max`: the one page-size rule of
/// every paged read.
pub(crate) fn page_limit(limit: usize, max: usize) -> Result<()> {
    if limit == 0 || limit > max {
        return Err(Error::InvalidInput {
            reason: Invalid::PageLimit { limit, max },
        });
    }
    Ok(())
}

/// The largest document MongoDB stores.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// Bytes a one-field document `{"": value}` adds to the encoding of `value`: the document's
/// length (4), the element's type (1), the empty key's terminator (1) and the document's (1).
const WRAPPER_BYTES: usize = 7;

/// The BSON-encoded size of `value` in bytes, failing with
/// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) naming `what` when it is over `limit`:
/// the one size check of every store, run on the caller's input before anything is sent.
///
/// A document (a [`bson::Document`], or any type that serializes to one) measures as the
/// document it encodes to; any other value (a string, an array, a number) as the value of a
/// field, without the field's name: what it adds to the document that holds it, less its
/// key. Fails with [`Error::Encode`] for a value BSON cannot encode.
pub(crate) fn encoded_size(
    what: &'static str,
    value: &(impl Serialize + ?Sized),
    limit: usize,
) -> Result<usize> {
    /// `{"": value}`: any value, a document or not, encodes as a field of a document.
    #[derive(Serialize)]
    struct Wrapped<'a, T: ?Sized> {
        #[serde(rename = "")]
        value: &'a T,
    }
    let size = bson::to_vec(&Wrapped { value })?.len() - WRAPPER_BYTES;
    if size > limit {
        return Err(Error::InvalidInput {
            reason: Invalid::TooLarge { what, size, limit },
        });
    }
    Ok(size)
}

/// Fails with [`Error::InvalidConfig`] for a name MongoDB would refuse.
pub(crate) fn check_collection_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('$') || name.contains('\0') || name.starts_with("system.") {
        return Err(Error::InvalidConfig {
            reason: format!("`{name}` is not a usable collection name"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_page_limit_rule() {
        assert!(page_limit(1, 10).is_ok() && page_limit(10, 10).is_ok());
        for limit in [0, 11] {
            assert!(matches!(
                page_limit(limit, 10),
                Err(Error::InvalidInput { reason: Invalid::PageLimit { limit: l, max: 10 } }) if l == limit
            ));
        }
    }

    #[test]
    fn one_size_check_for_documents_and_values() {
        let document = bson::doc! { "text": "x".repeat(100), "n": 1 };
        let exact = bson::to_vec(&document).unwrap().len();
        assert_eq!(encoded_size("post", &document, exact).unwrap(), exact);
        assert!(matches!(
            encoded_size("post", &document, exact - 1),
            Err(Error::InvalidInput { reason: Invalid::TooLarge { what: "post", size, limit } })
                if size == exact && limit == exact - 1
        ));
        // A string is its length, its terminator and the 4 bytes of its length.
        assert_eq!(encoded_size("text", "abc", 100).unwrap(), 8);
        assert_eq!(encoded_size("text", &"abc".to_owned(), 100).unwrap(), 8);
        // A struct is the document it encodes to; a number its bytes.
        #[derive(Serialize)]
        struct Data {
            text: String,
            n: i32,
        }
        let data = Data {
            text: "x".repeat(100),
            n: 1,
        };
        assert_eq!(encoded_size("data", &data, usize::MAX).unwrap(), exact);
        assert_eq!(encoded_size("data", &5_i64, usize::MAX).unwrap(), 8);
        let huge = "x".repeat(MAX_DOCUMENT_BYTES + 1);
        assert!(matches!(
            encoded_size("comment", &huge, MAX_DOCUMENT_BYTES),
            Err(Error::InvalidInput { reason: Invalid::TooLarge { what: "comment", size, .. } })
                if size == MAX_DOCUMENT_BYTES + 6
        ));
    }

    #[test]
    fn ids_have_one_length_limit() {
        assert!(id("discussion id", &"d".repeat(MAX_ID_BYTES)).is_ok());
        let long = "d".repeat(10 * 1024);
        assert!(matches!(
            id("discussion id", &long),
            Err(Error::InvalidInput {
                reason: Invalid::TooLong {
                    what: "discussion id",
                    bytes: 10240,
                    max: MAX_ID_BYTES
                }
            })
        ));
        // Bytes, not characters.
        assert!(user_id("owner", &"é".repeat(MAX_ID_BYTES / 2 + 1)).is_err());
    }

    #[test]
    fn empty_and_whitespace_are_the_same_error() {
        for blank in ["", " ", "\t\n", "\u{3000}"] {
            assert!(matches!(
                user_id("owner", blank),
                Err(Error::InvalidInput {
                    reason: Invalid::Blank { what: "owner" }
                })
            ));
            assert!(matches!(
                non_blank("text", blank),
                Err(Error::InvalidInput {
                    reason: Invalid::Blank { what: "text" }
                })
            ));
        }
        assert!(user_id("owner", " bob ").is_ok());
        assert!(non_blank("text", "x").is_ok());
    }
}
