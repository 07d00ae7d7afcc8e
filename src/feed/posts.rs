//! Posts: one denormalized document each, read with one query.

use std::collections::HashMap;

use bson::{doc, Document};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::users::UserChunk;
use super::{FeedStore, PostId};
use crate::bson_ext;
use crate::validate::{non_blank, user_id};
use crate::Payload;
use crate::{Entity, Error, Result};

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

/// A post to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct NewPost<X> {
    /// The creator's user id; the store copies their [`UserChunk`] into the post.
    pub author: String,
    /// Title (a post needs a title or a body).
    pub title: String,
    /// Text.
    pub body: String,
    /// Pictures.
    pub images: Vec<Media>,
    /// Videos.
    pub videos: Vec<Media>,
    /// Audio clips.
    pub audio: Vec<Media>,
    /// The application's fields.
    pub extension: X,
}

impl<X> NewPost<X> {
    /// A post without media.
    ///
    /// ```
    /// use mongo_social::feed::{Media, NewPost};
    /// let post = NewPost::new("ann", "Trip", "Photos from the coast", ())
    ///     .image(Media::new("https://img.example/1.png", "Beach"));
    /// assert_eq!(post.images.len(), 1);
    /// ```
    pub fn new(
        author: impl Into<String>,
        title: impl Into<String>,
        body: impl Into<String>,
        extension: X,
    ) -> Self {
        Self {
            author: author.into(),
            title: title.into(),
            body: body.into(),
            images: Vec::new(),
            videos: Vec::new(),
            audio: Vec::new(),
            extension,
        }
    }

    /// Adds a picture.
    pub fn image(mut self, media: Media) -> Self {
        self.images.push(media);
        self
    }

    /// Adds a video.
    pub fn video(mut self, media: Media) -> Self {
        self.videos.push(media);
        self
    }

    /// Adds an audio clip.
    pub fn audio(mut self, media: Media) -> Self {
        self.audio.push(media);
        self
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

impl<X: Payload> FeedStore<X> {
    /// Publishes a post and queues its fan-out to feeds: `find` (the creator's chunk), `insert`
    /// (the job), `insert` (the post) — 3 commands. Feeds show it once a worker ran the job. The
    /// job is queued first, so a crash between the two never leaves a post outside the feeds; a
    /// job that runs before its post is stored is retried with back-off, and dropped if the post
    /// never appears.
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Error::Blank`] for an empty author, a post with
    /// neither title nor body, or a media item without url; [`Error::TooLarge`] above
    /// [`super::FeedStoreBuilder::max_post_bytes`]; [`Error::NotFound`] for an unknown author. If
    /// the post cannot be inserted, its job is deleted again and the error returned.
    pub async fn create_post(&self, post: NewPost<X>) -> Result<Post<X>> {
        user_id("author", &post.author)?;
        if post.title.trim().is_empty() && post.body.trim().is_empty() {
            return Err(Error::Blank {
                what: "title and body",
            });
        }
        let media = post.images.iter().chain(&post.videos).chain(&post.audio);
        for item in media {
            non_blank("media url", &item.url)?;
        }
        // Size is checked with a placeholder chunk first, so an oversize post costs no read.
        let mut stored = Post {
            id: PostId::new(),
            title: post.title,
            body: post.body,
            created: self.clock.now(),
            created_by: UserChunk {
                id: post.author.clone(),
                username: String::new(),
                revision: 0,
            },
            images: post.images,
            videos: post.videos,
            audio: post.audio,
            extension: post.extension,
        };
        self.check_post_size(&bson::to_document(&stored)?)?;
        stored.created_by = self.chunk_of(&post.author).await?;
        let document = bson::to_document(&stored)?;
        self.check_post_size(&document)?;
        // The job first: a crash after it leaves a job that waits for its post (and is dropped
        // after a while), never a post that no feed will show.
        let job = self
            .jobs
            .enqueue(
                super::feeds::JOB_POST_CREATED,
                doc! { "post": stored.id.0, "created": stored.created },
            )
            .await?;
        if let Err(error) = self.collections.posts.insert_one(document).await {
            // Best effort: a job left behind finds no post and is dropped after a while.
            let _ = self.jobs.cancel(job).await;
            return Err(error.into());
        }
        Ok(stored)
    }

    fn check_post_size(&self, document: &Document) -> Result<()> {
        let size = bson::to_vec(document)?.len();
        let limit = self.settings.max_post_bytes;
        if size > limit {
            return Err(Error::TooLarge {
                what: "post",
                size,
                limit,
            });
        }
        Ok(())
    }

    /// One post, with one `find`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown post.
    pub async fn post(&self, id: PostId) -> Result<Post<X>> {
        let found = self
            .collections
            .posts
            .find_one(doc! { "_id": id.0 })
            .await?
            .ok_or_else(|| not_found_post(id))?;
        bson_ext::decode(self.collections.posts.name(), found)
    }

    /// The post's `created`, or [`Error::NotFound`] (one `find`).
    pub(super) async fn post_created(&self, id: PostId) -> Result<bson::DateTime> {
        let found = self
            .collections
            .posts
            .find_one(doc! { "_id": id.0 })
            .projection(doc! { "_id": 1, "created": 1 })
            .await?
            .ok_or_else(|| not_found_post(id))?;
        found.get_datetime("created").copied().map_err(|_| {
            bson_ext::corrupt(
                self.collections.posts.name(),
                Some(id.0.into()),
                "a post lacks created",
            )
        })
    }

    /// Fails with [`Error::NotFound`] unless the post exists (one `find` of its `_id`).
    pub(super) async fn check_post_exists(&self, id: PostId) -> Result<()> {
        self.collections
            .posts
            .find_one(doc! { "_id": id.0 })
            .projection(doc! { "_id": 1 })
            .await?
            .map(|_| ())
            .ok_or_else(|| not_found_post(id))
    }

    /// The posts with these ids, in this order, in one `find` with `$in` (MongoDB returns `$in`
    /// matches in any order). Ids of deleted posts are skipped.
    pub async fn posts_in_order(&self, ids: &[PostId]) -> Result<Vec<Post<X>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let raw: Vec<bson::oid::ObjectId> = ids.iter().map(|id| id.0).collect();
        let found: Vec<Document> = self
            .collections
            .posts
            .find(doc! { "_id": { "$in": &raw } })
            .await?
            .try_collect()
            .await?;
        let mut by_id = HashMap::with_capacity(found.len());
        for document in found {
            let post: Post<X> = bson_ext::decode(self.collections.posts.name(), document)?;
            by_id.insert(post.id, post);
        }
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }
}

pub(super) fn not_found_post(id: PostId) -> Error {
    Error::NotFound {
        what: Entity::Post,
        id: id.to_string(),
    }
}
