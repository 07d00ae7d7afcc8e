//! Input checks shared by every strategy, run before anything is written.

use crate::error::Invalid;
use serde::Serialize;

use super::NewComment;
use crate::{Entity, Error, PageRequest, Result};

/// Fails with [`Invalid::Blank`](crate::error::Invalid::Blank) for a blank discussion id.
pub(super) fn check_discussion(discussion: &str) -> Result<()> {
    crate::validate::id("discussion id", discussion)
}

/// Fails with [`Invalid::Blank`](crate::error::Invalid::Blank) for blank text.
pub(super) fn check_text(text: &str) -> Result<()> {
    crate::validate::non_blank("text", text)
}

/// Checks a new comment: discussion, author id and text present ([`Invalid::Blank`](crate::error::Invalid::Blank)).
pub(super) fn check_new_comment(discussion: &str, comment: &NewComment) -> Result<()> {
    check_discussion(discussion)?;
    crate::validate::user_id("author", &comment.author.id)?;
    check_text(&comment.text)
}

/// The encoded size of `value`, failing with [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) above `limit` bytes.
pub(super) fn check_size(value: &impl Serialize, limit: usize) -> Result<usize> {
    let size = bson::to_vec(value)?.len();
    if size > limit {
        return Err(Error::InvalidInput(Invalid::TooLarge {
            what: "comment",
            size,
            limit,
        }));
    }
    Ok(size)
}

/// Checks a page read's discussion and limit.
pub(super) fn check_page(discussion: &str, page: &PageRequest) -> Result<()> {
    check_discussion(discussion)?;
    page.check()
}

/// [`Invalid::Link`](crate::error::Invalid::Link) for `link`.
pub(super) fn invalid_link(link: &str, reason: &'static str) -> Error {
    Error::InvalidInput(Invalid::Link {
        link: link.to_owned(),
        reason,
    })
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
