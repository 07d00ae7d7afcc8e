//! A comment as its document stores it, with its votes and the keys its ranked pages sort by.

use bson::oid::ObjectId;
use serde::{Deserialize, Serialize};

use crate::comments::body::Body;
use crate::comments::keyed::StoredKey;
use crate::comments::{slug, Comment, Sort, Votes};

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
    #[serde(flatten)]
    pub(super) body: Body,
    #[serde(flatten)]
    pub(super) ranking: Ranking,
    /// A keyed comment's key.
    #[serde(flatten)]
    pub(super) key: StoredKey,
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
    /// The comment `body` of `discussion`, with slug `part` stepped at `micros` (a posting time
    /// in microseconds), placed under `parent` or at the top level: without votes or a key.
    pub(super) fn placed(
        discussion: &str,
        parent: Option<&Stored>,
        part: &str,
        micros: i64,
        body: Body,
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
            ranking: Ranking::of(Votes::default(), body.posted),
            body,
            key: StoredKey::default(),
        }
    }

    pub(super) fn comment(&self) -> Comment {
        let parent = self
            .slug
            .rsplit_once('/')
            .map(|(parent, _)| parent.to_owned());
        self.body.comment(
            self.slug.clone(),
            parent,
            self.slug.matches('/').count(),
            self.ranking.votes(),
        )
    }

    /// A tombstone in place of this comment, removed (with its votes) by a delete.
    pub(super) fn tombstone(&self) -> Self {
        Self {
            body: self.body.tombstone(),
            ranking: Ranking::of(Votes::default(), self.body.posted),
            ..self.clone()
        }
    }
}
