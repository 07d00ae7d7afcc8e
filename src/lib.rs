#![doc = include_str!("lib.md")]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The guides' examples (`docs/`), compiled and run as doctests.
#[cfg(doctest)]
mod guide_doctests {
    #[doc = include_str!("../docs/INBOXES.md")]
    struct Inboxes;
    #[doc = include_str!("../docs/COMMENTS.md")]
    struct Comments;
    #[doc = include_str!("../docs/GRAPH.md")]
    struct Graph;
    #[doc = include_str!("../docs/FEED.md")]
    struct Feed;
    #[doc = include_str!("../docs/NOTIFICATIONS.md")]
    struct Notifications;
    #[doc = include_str!("../docs/FAILURES.md")]
    struct Failures;
    #[doc = include_str!("../docs/WEB.md")]
    struct Web;
}

mod backend;
mod bson_ext;
pub mod comments;
mod config;
pub mod delivery;
pub mod error;
pub mod feed;
pub mod graph;
mod idempotency;
pub mod inbox;
pub mod jobs;
pub mod migrate;
mod names;
pub mod notifications;
pub mod observe;
pub mod page;
mod payload;
pub mod prelude;
pub mod realtime;
mod retry;
pub mod server;
pub mod sharding;
mod validate;

#[doc(hidden)]
pub mod test_support;

/// The `bson` crate this crate is built on (2.x), whose types its public fields use
/// ([`bson::DateTime`], [`bson::oid::ObjectId`]): name them through it, and an application
/// needs no `bson` dependency of its own (nor a second copy of another version).
pub use bson;
/// The MongoDB driver this crate is built on (3.x): its [`Client`](mongodb::Client) and
/// [`Database`](mongodb::Database) are what every store is built on.
pub use mongodb;

// The root holds, for every module, its stores, the traits they implement and the values their
// core operations take and return, with the vocabulary every module shares (pages, errors,
// retries, the server); builders, options and the rest stay in their module
// (`comments::Strategy`, `inbox::Strategy`, `feed::SearchOrder`, ...).
pub use comments::{
    Author, Comment, CommentStore, DynCommentStore, Embedded, HybridPages, NewComment, PerComment,
    ThreadedComments,
};
pub use delivery::Delivery;
pub use error::{Entity, Error, Result};
pub use feed::{FeedKind, FeedStore, NewPost, NewUser, Post, PostId, User, UserChunk};
pub use graph::{FollowGraph, FollowSource, Origin, Recommendation, Subscription, UserStats};
pub use inbox::{
    BucketedFanOut, DynInboxLifecycle, DynInboxStore, FanOutOnRead, FanOutOnWrite, InboxLifecycle,
    InboxStore, Message, MessageId, NewMessage, Payload,
};
pub use jobs::{Job, JobHandler, JobQueue, Worker};
pub use notifications::{NotificationStore, Notifier};
pub use page::{Cursor, Page, PageRequest};
pub use retry::RetryPolicy;
pub use server::{Capabilities, ServerInfo};
pub use sharding::ShardKey;
pub use validate::MAX_ID_BYTES;
