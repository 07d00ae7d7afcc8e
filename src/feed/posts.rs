//! The [`Posts`] handle: publishing posts and reading them, one denormalized document each.

use crate::error::Invalid;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bson::doc;

use super::inner::{not_found_post, Inner};
use super::jobs::FeedJob;
use super::types::{Media, Post, PostId, UserChunk};
use crate::bson_ext;
use crate::validate::{non_blank, user_id};
use crate::Payload;
use crate::{Error, Result};

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

/// Posts: publish one, read one, read many in a given order. From [`super::FeedStore::posts`];
/// cheap to clone.
///
/// ```no_run
/// # async fn demo(store: mongo_social::FeedStore<()>) -> mongo_social::Result<()> {
/// use mongo_social::feed::NewPost;
///
/// let posts = store.posts();
/// let post = posts.create(NewPost::new("ann", "Hello", "First post", ())).await?;
/// assert_eq!(posts.get(post.id).await?.title, "Hello");
/// # Ok(()) }
/// ```
#[must_use = "a handle does nothing until one of its methods is called"]
pub struct Posts<X> {
    inner: Arc<Inner>,
    _extension: PhantomData<fn() -> X>,
}

impl<X> Clone for Posts<X> {
    fn clone(&self) -> Self {
        Self::new(self.inner.clone())
    }
}

impl<X> fmt::Debug for Posts<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Posts").field(&self.inner).finish()
    }
}

impl<X> Posts<X> {
    pub(super) fn new(inner: Arc<Inner>) -> Self {
        Self {
            inner,
            _extension: PhantomData,
        }
    }
}

impl<X: Payload> Posts<X> {
    /// Publishes a post and queues its fan-out to feeds: `find` (the creator's chunk), `insert`
    /// (the job), `insert` (the post) — 3 commands. Feeds show it once a worker ran the job. The
    /// job is queued first, so a crash between the two never leaves a post outside the feeds; a
    /// job that runs before its post is stored is retried with back-off, and dropped if the post
    /// never appears.
    ///
    /// # Errors
    ///
    /// Before anything is written: [`Invalid::Blank`](crate::error::Invalid::Blank) for an empty
    /// author, a post with neither title nor body, or a media item without url;
    /// [`Invalid::TooLong`](crate::error::Invalid::TooLong) (`"author"`) for an author id over
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES); [`Invalid::TooLarge`](crate::error::Invalid::TooLarge)
    /// (`"post"`) for a post (title, body, media and the application's fields, encoded as
    /// stored) above [`super::FeedStoreBuilder::max_post_bytes`] (256 KiB by default), before
    /// any command; [`Error::NotFound`] for an unknown author. If the post cannot be inserted,
    /// its job is deleted again and the error returned.
    pub async fn create(&self, post: NewPost<X>) -> Result<Post<X>> {
        user_id("author", &post.author)?;
        if post.title.trim().is_empty() && post.body.trim().is_empty() {
            return Err(Error::InvalidInput(Invalid::Blank {
                what: "title and body",
            }));
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
            created: self.inner.clock.now(),
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
        let limit = self.inner.settings.max_post_bytes;
        crate::validate::encoded_size("post", &stored, limit)?;
        stored.created_by = self.inner.chunk_of(&post.author).await?;
        let document = bson::to_document(&stored)?;
        crate::validate::encoded_size("post", &document, limit)?;
        // The job first: a crash after it leaves a job that waits for its post (and is dropped
        // after a while), never a post that no feed will show.
        let job = FeedJob::PostCreated {
            post: stored.id,
            created: Some(stored.created),
        }
        .enqueue(&self.inner.jobs)
        .await?;
        if let Err(error) = self.inner.collections.posts.insert_one(document).await {
            // Best effort: a job left behind finds no post and is dropped after a while.
            let _ = self.inner.jobs.cancel(job).await;
            return Err(error.into());
        }
        Ok(stored)
    }

    /// One post, with one `find`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown post.
    pub async fn get(&self, id: PostId) -> Result<Post<X>> {
        let posts = &self.inner.collections.posts;
        let found = posts
            .find_one(doc! { "_id": id.0 })
            .await?
            .ok_or_else(|| not_found_post(id))?;
        bson_ext::decode(posts.name(), found)
    }

    /// The posts with these ids, in this order, in one `find` with `$in` (MongoDB returns `$in`
    /// matches in any order). Ids of deleted posts are skipped.
    pub async fn get_many(&self, ids: &[PostId]) -> Result<Vec<Post<X>>> {
        self.inner.posts_in_order(ids).await
    }
}
