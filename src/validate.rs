//! Input checks shared by every module, run before anything is written: one rule for required
//! text (not empty, not only whitespace) and one error variant per kind of input.
//!
//! - Required text that is blank is [`Error::Blank`], in every module: a user id (an inbox's
//!   sender, recipient or owner; a comment's author; a follower or followee; a feed's user or
//!   author; a delivery's author or reader), named by its role, or any other (a group or
//!   discussion id, a username, a comment's text, a post's title and body, search terms, a job's
//!   kind), named by its field.
//! - A page size outside `1..=max` is [`Error::InvalidPageLimit`].
//! - A collection name MongoDB would refuse, or two roles given one collection, is
//!   [`Error::InvalidConfig`].

use crate::{Error, Result};

/// Whether `text` is empty or only whitespace.
pub(crate) fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Fails with [`Error::Blank`] (naming the id's role `what`: `"sender"`, `"owner"`, ...) for a
/// blank user id.
pub(crate) fn user_id(what: &'static str, id: &str) -> Result<()> {
    non_blank(what, id)
}

/// Fails with [`Error::Blank`] (naming `field`) for blank required text.
pub(crate) fn non_blank(field: &'static str, value: &str) -> Result<()> {
    if is_blank(value) {
        return Err(Error::Blank { what: field });
    }
    Ok(())
}

/// Fails with [`Error::InvalidPageLimit`] unless `1 <= limit <= max`: the one page-size rule of
/// every paged read.
pub(crate) fn page_limit(limit: usize, max: usize) -> Result<()> {
    if limit == 0 || limit > max {
        return Err(Error::InvalidPageLimit { limit, max });
    }
    Ok(())
}

/// The largest document MongoDB stores.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

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
                Err(Error::InvalidPageLimit { limit: l, max: 10 }) if l == limit
            ));
        }
    }

    #[test]
    fn empty_and_whitespace_are_the_same_error() {
        for blank in ["", " ", "\t\n", "\u{3000}"] {
            assert!(matches!(
                user_id("owner", blank),
                Err(Error::Blank { what: "owner" })
            ));
            assert!(matches!(
                non_blank("text", blank),
                Err(Error::Blank { what: "text" })
            ));
        }
        assert!(user_id("owner", " bob ").is_ok());
        assert!(non_blank("text", "x").is_ok());
    }
}
