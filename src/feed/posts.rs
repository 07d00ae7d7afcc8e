//! The [`Posts`] handle: publishing posts and reading them, one denormalized document each.

use crate::error::Invalid;

use bson::{doc, Document};

use super::jobs::FeedJob;
use super::state::{handle, not_found_post, FeedState};
use super::types::{Media, Post, PostId, UserChunk};
use crate::bson_ext;
use crate::idempotency::{CONTENT, KEY};
use crate::observe::spans::Op;
use crate::payload::Payload;
use crate::validate::{non_blank, user_id};
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
    /// The caller's idempotency key, if any (see [`NewPost::with_key`]).
    pub key: Option<String>,
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
            key: None,
        }
    }

    /// The same post with an idempotency key: a caller-chosen id (blank or longer than
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES) refused), unique per author, that makes a repeated
    /// [`Posts::create`] (a client retrying a request whose response it lost) return the first
    /// call's post (the same id and creation time, as it reads now) and write nothing. The same
    /// key with other content is [`Error::Conflict`]. Enforced in the database under
    /// concurrency: a record in `post_keys` whose `_id` is derived from the author and the key.
    ///
    /// ```no_run
    /// # async fn demo(store: mongo_social::FeedStore<()>) -> mongo_social::Result<()> {
    /// use mongo_social::feed::NewPost;
    /// let post = NewPost::new("ann", "Trip", "Photos", ()).with_key("req-9b1e");
    /// let first = store.posts().create(post.clone()).await?;
    /// let again = store.posts().create(post).await?; // a retried request
    /// assert_eq!((again.id, again.created), (first.id, first.created));
    /// # Ok(()) }
    /// ```
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
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

/// A keyed post's record id, key, content digest and author.
struct KeyedPost {
    id: bson::oid::ObjectId,
    key: String,
    content: String,
    author: String,
}

/// The post id a keyed post's record names.
fn record_post(inner: &FeedState, record: &Document) -> Result<PostId> {
    record.get_object_id("post").map(PostId).map_err(|_| {
        bson_ext::corrupt(
            inner.collections.post_keys.name(),
            record.get("_id").cloned(),
            "post",
        )
    })
}

/// The creation time a keyed post's record names.
fn record_created(inner: &FeedState, record: &Document) -> Result<bson::DateTime> {
    record.get_datetime("created").copied().map_err(|_| {
        bson_ext::corrupt(
            inner.collections.post_keys.name(),
            record.get("_id").cloned(),
            "created",
        )
    })
}

handle! {
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
    Posts<X>
}

/// Checks a post before anything is read: its author, key, text and media urls.
fn check_new_post<X>(post: &NewPost<X>) -> Result<()> {
    user_id("author", &post.author)?;
    crate::idempotency::check(post.key.as_deref())?;
    if post.title.trim().is_empty() && post.body.trim().is_empty() {
        return Err(Error::InvalidInput {
            reason: Invalid::Blank {
                what: "title and body",
            },
        });
    }
    let media = post.images.iter().chain(&post.videos).chain(&post.audio);
    for item in media {
        non_blank("media url", &item.url)?;
    }
    Ok(())
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
    /// [`MAX_ID_BYTES`](crate::validate::MAX_ID_BYTES); [`Invalid::TooLarge`](crate::error::Invalid::TooLarge)
    /// (`"post"`) for a post (title, body, media and the application's fields, encoded as
    /// stored) above [`super::FeedStoreBuilder::max_post_bytes`] (256 KiB by default), before
    /// any command; [`Error::NotFound`] for an unknown author. If the post cannot be inserted,
    /// its job is deleted again and the error returned.
    /// [`Error::Conflict`] for a key the author used for another post, nothing written.
    ///
    /// # Idempotency keys
    ///
    /// A post with a key ([`NewPost::with_key`]) is created once per author and key: the
    /// record `{_id: derived from author and key, post, created, ...}` in `post_keys` is
    /// inserted first (its unique `_id` makes one attempt's id and time the post's), then the
    /// job and the post under those ids (each inserted once), then the record is marked done: a
    /// first keyed create costs 3 commands more, a repeat 2 `find`s and no write, and a repeat of
    /// one interrupted after its record completes it. A keyed post deleted since is not
    /// recreated: its repeat is [`Error::NotFound`].
    ///
    /// ```no_run
    /// # async fn demo(store: mongo_social::FeedStore<()>) -> mongo_social::Result<()> {
    /// use mongo_social::feed::NewPost;
    /// let post = NewPost::new("ann", "Trip", "Photos", ()).with_key("req-1");
    /// let first = store.posts().create(post.clone()).await?;
    /// assert_eq!(store.posts().create(post).await?.id, first.id);
    /// # Ok(()) }
    /// ```
    pub async fn create(&self, post: NewPost<X>) -> Result<Post<X>> {
        Op::FeedPostsCreate
            .span()
            .run(async move {
                check_new_post(&post)?;
                let keyed = match &post.key {
                    Some(key) => Some(self.keyed(&post, key)?),
                    None => None,
                };
                let mut record = None;
                if let Some(keyed) = &keyed {
                    // A repeat: one `find` of the record and one of the post, nothing written.
                    if let Some(found) = self.find_record(keyed).await? {
                        if found.get_bool("done") == Ok(true) {
                            return self.get(record_post(&self.inner, &found)?).await;
                        }
                        record = Some(found);
                    }
                }
                let (id, created) = match &record {
                    Some(found) => (
                        record_post(&self.inner, found)?,
                        record_created(&self.inner, found)?,
                    ),
                    None => (PostId::new(), self.inner.clock.now()),
                };
                let (stored, document) = self.stored_post(post, id, created).await?;
                match keyed {
                    None => self.publish(stored, document).await,
                    Some(keyed) => self.publish_keyed(stored, &keyed, record).await,
                }
            })
            .await
    }

    /// The post as stored, with its creator's chunk, and its document; both checked against the
    /// size limit (first with a placeholder chunk, so an oversize post costs no read).
    async fn stored_post(
        &self,
        post: NewPost<X>,
        id: PostId,
        created: bson::DateTime,
    ) -> Result<(Post<X>, Document)> {
        let mut stored = Post {
            id,
            title: post.title,
            body: post.body,
            created,
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
        Ok((stored, document))
    }

    /// Publishes a post without a key: the job, then the post.
    async fn publish(&self, stored: Post<X>, document: Document) -> Result<Post<X>> {
        // The job first: a crash after it leaves a job that waits for its post (and is
        // dropped after a while), never a post that no feed will show.
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

    /// Publishes a keyed post: the record first, whose unique `_id` makes one attempt's id and
    /// time the post's; then the job and the post under those (each once, by `_id`); then the
    /// record marked done. `record` is the unfinished record a repeat found, if any.
    async fn publish_keyed(
        &self,
        mut stored: Post<X>,
        keyed: &KeyedPost,
        record: Option<Document>,
    ) -> Result<Post<X>> {
        let record = match record {
            Some(record) => record,
            None => self.claim_record(keyed, &stored).await?,
        };
        let id = record_post(&self.inner, &record)?;
        if id != stored.id {
            // A concurrent attempt recorded the post first: its id and time are the post's.
            stored.id = id;
            stored.created = record_created(&self.inner, &record)?;
        }
        if record.get_bool("done") == Ok(true) {
            return self.get(id).await;
        }
        FeedJob::PostCreated {
            post: stored.id,
            created: Some(stored.created),
        }
        .enqueue_once(
            &self.inner.jobs,
            crate::bson_ext::derived_id(stored.id.0, "post_created"),
        )
        .await?;
        self.inner
            .backend
            .insert_once(&self.inner.collections.posts, bson::to_document(&stored)?)
            .await?;
        let done = doc! { "_id": keyed.id, "done": false };
        let records = &self.inner.collections.post_keys;
        self.inner
            .backend
            .command("finish keyed post", || {
                records.update_one(done.clone(), doc! { "$set": { "done": true } })
            })
            .await?;
        Ok(stored)
    }

    /// Inserts the record of a keyed post (once): this attempt's record, or the one a concurrent
    /// attempt inserted first.
    async fn claim_record(&self, keyed: &KeyedPost, stored: &Post<X>) -> Result<Document> {
        let record = doc! {
            "_id": keyed.id,
            "author": &stored.created_by.id,
            KEY: &keyed.key,
            CONTENT: &keyed.content,
            "post": stored.id.0,
            "created": stored.created,
            "done": false,
        };
        let records = &self.inner.collections.post_keys;
        if self
            .inner
            .backend
            .insert_once(records, record.clone())
            .await?
        {
            Ok(record)
        } else {
            self.find_record(keyed)
                .await?
                .ok_or_else(|| Error::contention("record keyed post", 1))
        }
    }

    /// A keyed post's record id and content digest.
    fn keyed(&self, post: &NewPost<X>, key: &str) -> Result<KeyedPost> {
        let content = crate::idempotency::digest(&(
            (&post.title, &post.body),
            (&post.images, &post.videos, &post.audio),
            bson::to_bson(&post.extension)?,
        ))?;
        Ok(KeyedPost {
            id: crate::idempotency::id(&post.author, key),
            key: key.to_owned(),
            content,
            author: post.author.clone(),
        })
    }

    /// The record of a keyed post, if any (one `find`), checked: [`Error::Conflict`] for one
    /// created with other content.
    async fn find_record(&self, keyed: &KeyedPost) -> Result<Option<Document>> {
        let records = &self.inner.collections.post_keys;
        let found = self
            .inner
            .backend
            .command("find keyed post", || {
                records.find_one(doc! { "_id": keyed.id })
            })
            .await?;
        let Some(found) = found else {
            return Ok(None);
        };
        if found.get_str("author") != Ok(keyed.author.as_str()) {
            return Err(Error::Conflict {
                what: crate::error::Entity::Post,
                id: keyed.key.clone(),
                reason: "its id is taken by another author's post",
            });
        }
        crate::idempotency::same(
            &found,
            crate::error::Entity::Post,
            &keyed.key,
            &keyed.content,
        )?;
        Ok(Some(found))
    }

    /// One post, with one `find`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown post.
    pub async fn get(&self, id: PostId) -> Result<Post<X>> {
        Op::FeedPostsGet
            .span()
            .run(async move {
                let posts = &self.inner.collections.posts;
                let found = posts
                    .find_one(doc! { "_id": id.0 })
                    .await?
                    .ok_or_else(|| not_found_post(id))?;
                bson_ext::decode(posts.name(), found)
            })
            .await
    }

    /// The posts with these ids, in this order, in one `find` with `$in` (MongoDB returns `$in`
    /// matches in any order). Ids of deleted posts are skipped.
    pub async fn get_many(&self, ids: &[PostId]) -> Result<Vec<Post<X>>> {
        Op::FeedPostsGetMany
            .span()
            .run(async move { self.inner.posts_in_order(ids).await })
            .await
    }
}
