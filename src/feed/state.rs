//! The state every handle shares (one per store, behind an `Arc`), and the reads that more than
//! one handle needs.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Collection;

use super::ranking::DynRanking;
use super::types::{Clock, Post, PostId, User, UserChunk};
use crate::backend::Backend;
use crate::bson_ext;
use crate::graph::DynFollowSource;
use crate::jobs::JobQueue;
use crate::payload::Payload;
use crate::validate;
use crate::{error::Entity, Error, Result};

/// The store's collections (its job queue and lock collections are the queue's and the
/// backend's).
#[derive(Clone, Debug)]
pub(super) struct Collections {
    pub(super) posts: Collection<Document>,
    pub(super) users: Collection<Document>,
    pub(super) extended_users: Collection<Document>,
    pub(super) counters: Collection<Document>,
    pub(super) likes: Collection<Document>,
    pub(super) feeds: Collection<Document>,
    pub(super) propagations: Collection<Document>,
    /// Keyed creates' records: `{_id: derived from author and key, author, idempotency_key,
    /// content_digest, post, created, done}`.
    pub(super) post_keys: Collection<Document>,
}

/// What the builder configured.
#[derive(Clone, Debug)]
pub(super) struct Settings {
    pub(super) max_feed_len: usize,
    pub(super) max_post_bytes: usize,
    pub(super) hot_window: Duration,
    pub(super) propagation_batch: usize,
    /// Collections and fields embedding a [`UserChunk`], updated by chunk propagation.
    pub(super) chunk_targets: Vec<(String, String)>,
}

/// Declares a handle of the store: the public struct `$name`, with the docs given, over the
/// shared [`FeedState`], and what every handle has: `Clone` (cheap: the state is shared), a
/// `Debug` that shows the state under the handle's name, and `new` for the store. A handle
/// written `Name<X>` carries the store's post extension type `X`, and is `Clone` whatever `X`
/// is.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident $(<$extension:ident>)?) => {
        $(#[$doc])*
        #[must_use = "a handle does nothing until one of its methods is called"]
        pub struct $name $(<$extension>)? {
            inner: std::sync::Arc<$crate::feed::state::FeedState>,
            $(_extension: std::marker::PhantomData<fn() -> $extension>,)?
        }

        impl $(<$extension>)? Clone for $name $(<$extension>)? {
            fn clone(&self) -> Self {
                Self::new(self.inner.clone())
            }
        }

        impl $(<$extension>)? std::fmt::Debug for $name $(<$extension>)? {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.inner).finish()
            }
        }

        impl $(<$extension>)? $name $(<$extension>)? {
            pub(super) fn new(inner: std::sync::Arc<$crate::feed::state::FeedState>) -> Self {
                Self {
                    inner,
                    $(_extension: std::marker::PhantomData::<fn() -> $extension>,)?
                }
            }
        }
    };
}

pub(super) use handle;

/// One store's state, shared by the store, its handles and its job handler.
pub(super) struct FeedState {
    /// The server's differences: writers of feeds and counters take turns where updates are
    /// not atomic.
    pub(super) backend: Backend,
    pub(super) collections: Collections,
    /// The feed's jobs (see `super::jobs`).
    pub(super) jobs: JobQueue,
    pub(super) follows: Arc<DynFollowSource>,
    pub(super) ranking: Arc<DynRanking>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) settings: Settings,
    /// Told of likes and unlikes, if the application asked.
    pub(super) outbox: Option<crate::notifications::Outbox>,
}

impl fmt::Debug for FeedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeedStore")
            .field("posts", &self.collections.posts.name())
            .field("follows", &self.follows)
            .field("ranking", &self.ranking)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl FeedState {
    /// A user's profile (one `find`), or [`Error::NotFound`].
    pub(super) async fn user(&self, id: &str) -> Result<User> {
        validate::user_id("user", id)?;
        let found = self.collections.users.find_one(doc! { "_id": id }).await?;
        let found = found.ok_or_else(|| not_found_user(id))?;
        bson_ext::decode(self.collections.users.name(), found)
    }

    /// The chunk of an existing user, for embedding (one `find`).
    pub(super) async fn chunk_of(&self, id: &str) -> Result<UserChunk> {
        let found = self
            .collections
            .users
            .find_one(doc! { "_id": id })
            .projection(doc! { "username": 1, "revision": 1 })
            .await?
            .ok_or_else(|| not_found_user(id))?;
        Ok(UserChunk {
            id: id.to_owned(),
            username: found.get_str("username").unwrap_or_default().to_owned(),
            revision: found
                .get_i64("revision")
                .or_else(|_| found.get_i32("revision").map(i64::from))
                .unwrap_or(0),
        })
    }

    /// The posts with these ids, in this order, in one `find` with `$in` (MongoDB returns `$in`
    /// matches in any order). Ids of deleted posts are skipped.
    pub(super) async fn posts_in_order<X: Payload>(&self, ids: &[PostId]) -> Result<Vec<Post<X>>> {
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

/// The error for an unknown post.
pub(super) fn not_found_post(id: PostId) -> Error {
    Error::not_found(Entity::Post, id.to_string())
}

/// The error for an unknown user.
pub(super) fn not_found_user(id: &str) -> Error {
    Error::not_found(Entity::User, id)
}
