//! The types every part of the feed shares: post ids and posts, the user ladder's chunk and
//! profile, which feed, and the clock.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::object_id::object_id_type;

object_id_type! {
    /// A post's stable id.
    PostId;
    /// A fresh id.
    fn new;
}

/// A picture, video or audio clip attached to a post.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    /// Where the media is served from.
    pub url: String,
    /// Its caption.
    pub title: String,
}

impl Media {
    /// A media item.
    pub fn new(url: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            title: title.into(),
        }
    }
}

/// A post as stored and read: everything a post view shows, in one document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Post<X> {
    /// The post's id.
    #[serde(rename = "_id")]
    pub id: PostId,
    /// Title.
    pub title: String,
    /// Text.
    pub body: String,
    /// When the store accepted it (millisecond precision).
    pub created: bson::DateTime,
    /// The creator, as of their latest chunk propagation.
    pub created_by: UserChunk,
    /// Pictures.
    pub images: Vec<Media>,
    /// Videos.
    pub videos: Vec<Media>,
    /// Audio clips.
    pub audio: Vec<Media>,
    /// The application's fields.
    pub extension: X,
}

/// The minimal identity copied into every post: what a post shows of its creator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserChunk {
    /// The user's id.
    pub id: String,
    /// The user's name as shown on posts.
    pub username: String,
    /// Goes up by one at each change of a chunk field; a copy is updated only by a newer one.
    pub revision: i64,
}

/// A user's profile as read on hot paths; holds the chunk's fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The user's id, chosen by the application.
    #[serde(rename = "_id")]
    pub id: String,
    /// Unique user name (chunk field).
    pub username: String,
    /// Name shown on the profile.
    pub display_name: String,
    /// Avatar picture, if any.
    pub avatar_url: Option<String>,
    /// Revision of the chunk fields.
    pub revision: i64,
}

impl User {
    /// The part of the user that is copied into posts.
    pub fn chunk(&self) -> UserChunk {
        UserChunk {
            id: self.id.clone(),
            username: self.username.clone(),
            revision: self.revision,
        }
    }
}

/// Which feed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FeedKind {
    /// Every post, newest first.
    Latest,
    /// The most liked posts of the hot window.
    Hot,
    /// A user's home feed: their posts and those of whom they follow.
    User(String),
}

impl FeedKind {
    /// The feed document's `_id`: `latest`, `hot` or `user:<id>`.
    pub fn key(&self) -> String {
        match self {
            FeedKind::Latest => "latest".to_owned(),
            FeedKind::Hot => "hot".to_owned(),
            FeedKind::User(user) => format!("user:{user}"),
        }
    }
}

/// Where the store gets the time: posts' `created`, likes' `at` and the hot window's end.
/// Replace it to test windows without waiting (see [`super::FeedStoreBuilder::clock`]).
///
/// An application implements it in tests (a clock it moves); the store calls it.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> bson::DateTime;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> bson::DateTime {
        bson::DateTime::now()
    }
}
