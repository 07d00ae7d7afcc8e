//! A social feed: denormalized posts, the user ladder, per-post counters, ranked feeds and
//! search, after seed 004 (Azure Cosmos DB's social-media guidance) applied to MongoDB.
//!
//! # The store and its handles
//!
//! One [`FeedStore`] holds every collection, sets them up (`create_indexes`, `shard_keys`,
//! `shard_collections`) and runs the feed's background jobs (`start_worker`, `run_pending`,
//! `wait_until_drained`). The work is done through its handles, one per concern; each is cheap
//! to clone and shares the store's state:
//!
//! | handle | from | does |
//! |---|---|---|
//! | [`Posts`] | [`FeedStore::posts`] | `create` a post (queues its fan-out), `get` one, `get_many` in a given order |
//! | [`Users`] | [`FeedStore::users`] | `create`, `get`, `put_extended` / `get_extended` the rarely read rest; `rename` (and `rename_in_background`), `propagate`, `run_propagation`, `unfinished_propagations`, `resume_propagations` |
//! | [`Likes`] | [`FeedStore::likes`] | `like`, `unlike`, `is_liked`; `counters`, `add_to_counter`; repairs: `settle`, `recount` |
//! | [`Feeds`] | [`FeedStore::feeds`] | `page` of a feed, its raw `items`; `refresh_hot`, `schedule_hot_refresh`, `rebuild_user` |
//! | [`Search`] | [`FeedStore::search`] | a `page` of the posts matching every term, newest or best match first |
//!
//! ```no_run
//! # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
//! use std::sync::Arc;
//! use mongo_social::feed::{Counter, FeedKind, FeedStore, NewPost, NewUser, SearchOrder};
//! use mongo_social::graph::FollowList;
//! use mongo_social::PageRequest;
//!
//! let follows = Arc::new(FollowList::from_pairs([("bob", "ann")]));
//! let store: FeedStore<()> = FeedStore::builder(&db).follows(follows).build()?;
//! store.create_indexes().await?;
//!
//! let users = store.users();
//! users.create(NewUser::new("ann", "ann")).await?;
//! users.create(NewUser::new("bob", "bob")).await?;
//! let post = store.posts().create(NewPost::new("ann", "Hello", "First post", ())).await?;
//! store.run_pending().await?; // the post's fan-out; or store.start_worker() in a service
//!
//! let likes = store.likes();
//! likes.like(post.id, "bob").await?; // true; liking again returns false and counts nothing
//! likes.add_to_counter(post.id, Counter::Comments, 1).await?;
//! assert_eq!(likes.counters(post.id).await?.likes, 1);
//!
//! users.rename("ann", "ann_sea").await?; // every copy of ann's chunk, in resumable batches
//! assert_eq!(store.posts().get(post.id).await?.created_by.username, "ann_sea");
//!
//! let bob = FeedKind::User("bob".into());
//! let page = store.feeds().page(&bob, PageRequest::first(20)).await?;
//! assert_eq!(page.items[0].id, post.id);
//! let best = SearchOrder::BestMatch;
//! let found = store.search().page("first", best, PageRequest::first(20)).await?;
//! assert_eq!(found.items.len(), 1);
//! # Ok(()) }
//! ```
//!
//! # Collections
//!
//! Names prefixed by [`FeedStoreBuilder::collection_prefix`]:
//!
//! | collection | document | indexes | shard key |
//! |---|---|---|---|
//! | `posts` | [`Post`]: title, body, `created`, `created_by` ([`UserChunk`]), media, extension | `{created_by.id: 1, _id: 1}`, `{created: -1, _id: -1}`, text `{title, body}` where supported | `{_id: "hashed"}` |
//! | `users` | [`User`], the hot profile | unique `{username: 1}` | unsharded (a shard key must prefix the unique index) |
//! | `extended_users` | [`ExtendedUser`], the rest | `_id` | `{_id: "hashed"}` |
//! | `post_counters` | [`Counters`]: `{_id: post, likes, comments, points}` | `_id` | `{_id: "hashed"}` |
//! | `post_likes` | `{_id: {post, user}, post, user, at, created, op}` (`created`: the post's; `pending` / `removing` while a like / unlike is not finished, see [`Likes::like`]) | `{post: 1, at: 1}`, `{at: 1}`, `{created: 1, at: 1}` | `{post: "hashed"}` |
//! | `feeds` | `{_id: "latest" \| "hot" \| "user:<id>", items: [{post, score}]}` | `_id` | `{_id: "hashed"}` |
//! | `propagations` | chunk propagation progress `{user, target, last_id, done}` | `{done: 1}` | `{_id: 1}` |
//! | `feed_jobs`, `feed_jobs_locks` | the [`JobQueue`](crate::jobs::JobQueue): `post_created`, `propagate` and `refresh_hot` jobs | see [`JobQueue`](crate::jobs::JobQueue) | see [`JobQueue`](crate::jobs::JobQueue) |
//! | `feed_locks` | leased locks (servers without atomic updates only) | `_id` | `{_id: 1}` |
//! | `post_keys` | a keyed post's record ([`NewPost::with_key`]): `{_id: derived from author and key, author, idempotency_key, content_digest, post, created, done}` | `_id` | `{_id: "hashed"}` |
//! | `post_likes_outbox`, `post_likes_outbox_locks` | with a [`notifier`](FeedStoreBuilder::notifier): the notifications owed, a [`JobQueue`](crate::jobs::JobQueue) (see [`Outbox`](crate::notifications::Outbox)) | see [`JobQueue`](crate::jobs::JobQueue) | see [`JobQueue`](crate::jobs::JobQueue) |
//!
//! # Partitioning: by user, by time, by category
//!
//! - **By user** (`created_by.id`): an author's posts live on one shard, so profile pages and
//!   chunk propagation are targeted; but a post read by id and a feed page's `$in` of post ids
//!   go to every shard, and a prolific author is a write hot spot.
//! - **By time** (`created`): the "latest" and "hot" windows read one range, but every new post
//!   lands on the shard owning the newest range: all writes on one shard.
//! - **By category**: topic feeds are targeted, but categories are uneven in size and traffic,
//!   so shards are too, and a post in several categories has no single home.
//!
//! The advice here is to shard posts (and their counters) on a hashed `_id`: a post read by id is
//! one shard, a feed page's `$in` goes only to the shards that own those ids, and writes spread
//! evenly. Author pages, propagation and search scatter, and they are rare or background work.
//! Likes are sharded by post so all likes of a post share one shard and the unique
//! `_id: {post, user}` stays unique cluster-wide.

// Layers, lowest first; a module imports only from the layers below it: `types`, `cursor`,
// `ranking`; `inner` (the shared state); `lists` (feed writes) and `propagation`; `jobs` (every
// job kind and its dispatch); the handles `posts`, `users`, `likes`, `feeds` and `search`, none
// of which imports another; `store`; `builder`.
mod builder;
mod cursor;
mod feeds;
mod jobs;
mod likes;
mod lists;
mod posts;
mod propagation;
mod ranking;
mod search;
mod state;
mod store;
mod types;
mod users;

pub use builder::{FeedStoreBuilder, COLLECTIONS};
pub use feeds::Feeds;
pub use likes::{Counter, Counters, Likes};
pub use lists::FeedItem;
pub use posts::{NewPost, Posts};
pub use propagation::PropagationStatus;
pub use ranking::{Candidate, DefaultRanking, DynRanking, Ranking};
pub use search::{Search, SearchOrder, FALLBACK_CANDIDATES};
pub use store::FeedStore;
pub use types::{Clock, FeedKind, Media, Post, PostId, SystemClock, User, UserChunk};
pub use users::{ExtendedUser, NewUser, Users};
