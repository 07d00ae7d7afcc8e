//! What every strategy stores of a comment besides where it is, its votes and its key: who wrote
//! what and when ([`Body`]). Each strategy flattens it into its own document (per comment) or
//! array element (embedded node, hybrid page entry), as it does a keyed comment's
//! [`StoredKey`](super::keyed::StoredKey), so the stored fields, their names and their order
//! are the same in all three.
//!
//! Flattening costs some decoding time: serde buffers a flattened struct's fields before it
//! decodes them. Measured with a release build on the development machine, decoding 2,000
//! comments (200-byte texts) took 6.6 to 7.3 ms flattened, against 4.6 to 5.6 ms for the same
//! fields declared in place: about 1 µs more per comment. That is small beside a read's round
//! trip, but it grows with a whole embedded discussion.

use serde::{Deserialize, Serialize};

use super::model::HeldComment;
use super::{Author, Comment, NewComment, Votes};

/// A comment's author, text and times, and whether it is a tombstone, as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Body {
    pub(super) posted: bson::DateTime,
    pub(super) author: Author,
    pub(super) text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) edited: Option<bson::DateTime>,
    pub(super) deleted: bool,
}

impl Body {
    /// `comment` as posted at `posted`: unedited.
    pub(super) fn posted_at(posted: bson::DateTime, comment: NewComment) -> Self {
        Self {
            posted,
            author: comment.author,
            text: comment.text,
            edited: None,
            deleted: false,
        }
    }

    /// `comment` as posted now.
    pub(super) fn new(comment: NewComment) -> Self {
        Self::posted_at(bson::DateTime::now(), comment)
    }

    /// An imported comment as it was exported: its times and whether it was deleted.
    pub(super) fn held(comment: &HeldComment) -> Self {
        Self {
            posted: comment.posted,
            author: comment.author.clone(),
            text: comment.text.clone(),
            edited: comment.edited,
            deleted: comment.deleted,
        }
    }

    /// This comment with its text replaced by `text`, edited at `at`.
    pub(super) fn edited(&self, text: &str, at: bson::DateTime) -> Self {
        Self {
            text: text.to_owned(),
            edited: Some(at),
            ..self.clone()
        }
    }

    /// This comment as a tombstone: deleted, without its text.
    pub(super) fn tombstone(&self) -> Self {
        Self {
            text: String::new(),
            deleted: true,
            ..self.clone()
        }
    }

    /// The tombstone of a comment known only by its place, posted at `posted`: no author, no
    /// text.
    pub(super) fn placeholder(posted: bson::DateTime) -> Self {
        Self {
            posted,
            author: Author::new("", ""),
            text: String::new(),
            edited: None,
            deleted: true,
        }
    }

    /// The comment at `link`, `depth` levels down under `parent` (its link), with `votes`.
    pub(super) fn comment(
        &self,
        link: String,
        parent: Option<String>,
        depth: usize,
        votes: Votes,
    ) -> Comment {
        Comment {
            link,
            parent,
            depth,
            author: self.author.clone(),
            text: self.text.clone(),
            posted: self.posted,
            edited: self.edited,
            deleted: self.deleted,
            votes,
        }
    }
}
