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
mod object_id;
pub mod observe;
pub mod page;
mod payload;
mod phantom_impls;
pub mod prelude;
pub mod realtime;
pub mod retry;
pub mod server;
mod setters;
pub mod sharding;
mod strategy_enum;
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

// The root names the entry points only: the stores, the values an application sends and reads
// back, pages, and the error. Everything else (builders' options, traits an application
// implements, ids, the server's description) is reached through its module
// (`inbox::MessageId`, `graph::FollowSource`, `server::ServerInfo`, ...); `prelude` brings every
// trait into scope at once.
pub use comments::{Comment, CommentStore, Embedded, HybridPages, NewComment, PerComment};
pub use delivery::Delivery;
pub use error::{Error, Result};
pub use feed::FeedStore;
pub use graph::FollowGraph;
pub use inbox::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, InboxStore, Message, NewMessage,
};
pub use jobs::JobQueue;
pub use notifications::NotificationStore;
pub use page::{Cursor, Page, PageRequest};
