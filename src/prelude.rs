//! The traits whose methods an application calls, to bring into scope at once:
//!
//! ```no_run
//! use mongo_social::prelude::*;
//! use mongo_social::comments::{Author, NewComment, PerComment, Sort, Vote};
//! use mongo_social::PageRequest;
//!
//! # async fn demo(db: mongo_social::mongodb::Database) -> mongo_social::Result<()> {
//! // A concrete store: no `Arc<dyn ..>`, no `Option`; the first post creates the discussion.
//! let comments = PerComment::builder(&db).create_discussions_on_post(true).build()?;
//! let hi = comments.post("article-42", NewComment::new(Author::new("u1", "Ann"), "Hi")).await?;
//! comments.reply("article-42", &hi.link, NewComment::new(Author::new("u2", "Bob"), "Hey")).await?;
//! comments.vote("article-42", &hi.link, "u2", Vote::Up).await?;
//! let best = comments.ranked("article-42", None, Sort::Best, PageRequest::first(20)).await?;
//! # Ok(()) }
//! ```
//!
//! A store's operations are trait methods (so that every strategy is one trait object), and a
//! trait's methods can be called only where the trait is in scope: a concrete
//! [`PerComment`](crate::PerComment) posts through [`CommentStore`], replies through
//! [`ThreadedComments`] and votes through [`VotedComments`]. The prelude has them all; naming
//! each one instead works as well.

pub use crate::comments::{CommentStore, ThreadedComments, VotedComments};
pub use crate::graph::FollowSource;
pub use crate::inbox::{InboxLifecycle, InboxStore};
pub use crate::jobs::JobHandler;
pub use crate::notifications::Notifier;
