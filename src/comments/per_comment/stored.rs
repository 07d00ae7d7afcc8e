//! A comment as its document stores it, with its votes and the keys its ranked pages sort by.

use bson::oid::ObjectId;
use serde::{Deserialize, Serialize};

use crate::comments::{slug, Author, Comment, Sort, Votes};

/// A comment as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Stored {
    #[serde(rename = "_id")]
    pub(super) id: ObjectId,
    pub(super) discussion_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) parent_id: Option<ObjectId>,
    /// The parent's slug, empty for a top-level comment: what ranked pages select by.
    #[serde(default)]
    pub(super) parent: String,
    pub(super) slug: String,
    pub(super) full_slug: String,
    pub(super) thread_key: String,
    pub(super) posted: bson::DateTime,
    pub(super) author: Author,
    pub(super) text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) edited: Option<bson::DateTime>,
    pub(super) deleted: bool,
    #[serde(flatten)]
    pub(super) ranking: Ranking,
    /// The caller's idempotency key, for a keyed comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) idempotency_key: Option<String>,
    /// The digest of what a keyed comment was posted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) content_digest: Option<String>,
}

/// A comment's votes and the keys its ranked pages sort by, as stored (the keys follow the
/// counts, see [`PerComment`]'s votes).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Ranking {
    #[serde(default)]
    pub(super) ups: i64,
    #[serde(default)]
    pub(super) downs: i64,
    #[serde(default)]
    pub(super) best: f64,
    #[serde(default)]
    pub(super) hot: f64,
    #[serde(default)]
    pub(super) top: f64,
    #[serde(default)]
    pub(super) controversial: f64,
}

impl Ranking {
    /// The counts of `votes` and the keys they give a comment posted at `posted`.
    pub(super) fn of(votes: Votes, posted: bson::DateTime) -> Self {
        let key = |sort: Sort| sort.key(votes, posted);
        Self {
            ups: votes.ups as i64,
            downs: votes.downs as i64,
            best: key(Sort::Best),
            hot: key(Sort::Hot),
            top: key(Sort::Top),
            controversial: key(Sort::Controversial),
        }
    }

    pub(super) fn votes(&self) -> Votes {
        Votes::from_stored(self.ups, self.downs)
    }

    pub(super) fn key(&self, sort: Sort) -> f64 {
        match sort {
            Sort::Best => self.best,
            Sort::Hot => self.hot,
            Sort::Top => self.top,
            Sort::Controversial => self.controversial,
        }
    }
}

/// The stored field of `sort`'s key.
pub(super) fn sort_field(sort: Sort) -> &'static str {
    sort.name()
}

impl Stored {
    /// A comment of `discussion` by `author` saying `text`, posted at `posted`, with slug `part`
    /// stepped at `micros` (a posting time in microseconds), placed under `parent` or at the top
    /// level: unedited, without votes or a key.
    pub(super) fn placed(
        discussion: &str,
        parent: Option<&Stored>,
        part: &str,
        micros: i64,
        posted: bson::DateTime,
        author: Author,
        text: String,
    ) -> Self {
        let step = slug::step(micros, part);
        let (slug, full_slug, thread_key, parent_slug) = match parent {
            None => (
                part.to_owned(),
                step.clone(),
                slug::reversed_step(&step),
                String::new(),
            ),
            Some(parent) => (
                format!("{}/{part}", parent.slug),
                format!("{}/{step}", parent.full_slug),
                format!("{}/{step}", parent.thread_key),
                parent.slug.clone(),
            ),
        };
        Self {
            id: ObjectId::new(),
            discussion_id: discussion.to_owned(),
            parent_id: parent.map(|parent| parent.id),
            parent: parent_slug,
            slug,
            full_slug,
            thread_key,
            posted,
            author,
            text,
            edited: None,
            deleted: false,
            ranking: Ranking::of(Votes::default(), posted),
            idempotency_key: None,
            content_digest: None,
        }
    }

    pub(super) fn comment(&self) -> Comment {
        let parent = self
            .slug
            .rsplit_once('/')
            .map(|(parent, _)| parent.to_owned());
        Comment {
            link: self.slug.clone(),
            depth: self.slug.matches('/').count(),
            parent,
            author: self.author.clone(),
            text: self.text.clone(),
            posted: self.posted,
            edited: self.edited,
            deleted: self.deleted,
            votes: self.ranking.votes(),
        }
    }

    /// A tombstone in place of this comment, removed (with its votes) by a delete.
    pub(super) fn tombstone(&self) -> Self {
        Self {
            text: String::new(),
            deleted: true,
            ranking: Ranking::of(Votes::default(), self.posted),
            ..self.clone()
        }
    }
}
