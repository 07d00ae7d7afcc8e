#![doc = include_str!("lib.md")]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod backend;
mod bson_ext;
pub mod comments;
mod config;
pub mod delivery;
pub mod error;
pub mod feed;
pub mod graph;
pub mod inbox;
mod indexes;
pub mod jobs;
mod lease_lock;
pub mod page;
mod payload;
mod retry;
pub mod server;
pub mod sharding;
mod update_batch;
mod validate;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

// Each module's stores and the traits they implement, at the root, with the page vocabulary every
// module shares; everything else stays in its module (`comments::NewComment`,
// `inbox::Strategy`, ...), except the inbox's and the feed's message and post types.
pub use comments::{CommentStore, DynCommentStore, Embedded, HybridPages, PerComment};
pub use delivery::Delivery;
pub use error::{Entity, Error, Result};
pub use feed::{FeedKind, FeedStore, NewPost, Post, PostId, UserChunk};
pub use graph::FollowGraph;
pub use inbox::{
    BucketedFanOut, DynInboxLifecycle, DynInboxStore, FanOutOnRead, FanOutOnWrite, InboxLifecycle,
    InboxStore, Message, MessageId, NewMessage, Payload,
};
pub use jobs::JobQueue;
pub use page::{Cursor, Page, PageRequest};
pub use retry::RetryPolicy;
pub use server::{Capabilities, ServerInfo};
pub use sharding::ShardKey;
