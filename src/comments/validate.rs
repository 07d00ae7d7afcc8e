//! Input checks shared by every strategy, run before anything is written.

use crate::error::Invalid;
use serde::Serialize;

use super::engine::Listing;
use super::{Author, NewComment};
use crate::{error::Entity, Error, PageRequest, Result};

/// Fails with [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank discussion id and
/// [`Invalid::TooLong`](crate::error::Invalid::TooLong) for one over
/// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) (`"discussion id"`).
pub(super) fn check_discussion(discussion: &str) -> Result<()> {
    crate::validate::id("discussion id", discussion)
}

/// Checks a new comment before anything is read or written, in this order: the discussion id,
/// the author's id ([`Invalid::Blank`](crate::error::Invalid::Blank),
/// [`Invalid::TooLong`](crate::error::Invalid::TooLong)), the text
/// ([`Invalid::Blank`](crate::error::Invalid::Blank)), then the size of the author and text,
/// which must fit `max_comment_bytes` on their own ([`Invalid::TooLarge`](crate::error::Invalid::TooLarge),
/// `"comment"`). The comment as stored, with its ids, times and votes, is measured again by
/// [`check_stored`] once built.
pub(super) fn check_new_comment(
    discussion: &str,
    comment: &NewComment,
    max_comment_bytes: usize,
) -> Result<()> {
    check_discussion(discussion)?;
    crate::validate::user_id("author", &comment.author.id)?;
    crate::validate::non_blank("text", &comment.text)?;
    #[derive(Serialize)]
    struct Draft<'a> {
        author: &'a Author,
        text: &'a str,
    }
    let draft = Draft {
        author: &comment.author,
        text: &comment.text,
    };
    crate::validate::encoded_size(COMMENT, &draft, max_comment_bytes).map(drop)
}

/// Checks an edit's new text: not blank ([`Invalid::Blank`](crate::error::Invalid::Blank)), and
/// within `max_comment_bytes` on its own ([`Invalid::TooLarge`](crate::error::Invalid::TooLarge),
/// `"comment"`), before the comment is read.
pub(super) fn check_text(text: &str, max_comment_bytes: usize) -> Result<()> {
    crate::validate::non_blank("text", text)?;
    crate::validate::encoded_size(COMMENT, text, max_comment_bytes).map(drop)
}

/// An edit's checks before anything is read: the discussion id, then the text ([`check_text`]).
pub(super) fn check_edit(discussion: &str, text: &str, max_comment_bytes: usize) -> Result<()> {
    check_discussion(discussion)?;
    check_text(text, max_comment_bytes)
}

/// The encoded size of a comment as stored, failing with
/// [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (`"comment"`) above `limit` bytes.
pub(super) fn check_stored(comment: &impl Serialize, limit: usize) -> Result<usize> {
    crate::validate::encoded_size(COMMENT, comment, limit)
}

/// What a comment too large is called in [`Invalid::TooLarge`](crate::error::Invalid::TooLarge).
const COMMENT: &str = "comment";

/// Checks a page read's discussion and limit: the page as engines take it.
pub(super) fn check_page(discussion: &str, page: PageRequest) -> Result<Listing<'_>> {
    check_discussion(discussion)?;
    page.check()?;
    Ok(Listing { discussion, page })
}

/// [`Invalid::Link`](crate::error::Invalid::Link) for `link`.
pub(super) fn invalid_link(link: &str, reason: &'static str) -> Error {
    Error::InvalidInput {
        reason: Invalid::Link {
            link: link.to_owned(),
            reason,
        },
    }
}

/// [`Error::NotFound`] for the comment at `link`.
pub(super) fn no_comment(what: Entity, link: &str) -> Error {
    Error::NotFound {
        what,
        id: link.to_owned(),
    }
}

/// [`Error::NotFound`] for a discussion.
pub(super) fn no_discussion(discussion: &str) -> Error {
    Error::NotFound {
        what: Entity::Discussion,
        id: discussion.to_owned(),
    }
}

/// Whether `error` is [`no_discussion`]'s.
pub(super) fn is_no_discussion(error: &Error) -> bool {
    matches!(
        error,
        Error::NotFound {
            what: Entity::Discussion,
            ..
        }
    )
}
