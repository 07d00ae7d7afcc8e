//! Comment threads: the three designs of the MongoDB manual's "Storing Comments" as three
//! strategies behind one [`CommentStore`] trait ([`CommentStore::strategy`] says which), with
//! threading ([`ThreadedComments`]) where the strategy has it.
//!
//! | strategy | post | read a page | threads | deletes | shard key |
//! |---|---|---|---|---|---|
//! | [`PerComment`] | 2 commands (3 for a reply) | one `find` | yes, any depth the index allows | leaves removed, others tombstoned | `{discussion_id: 1, slug: 1}` |
//! | [`Embedded`] | 1 command | one `find` of one document | yes, up to 45 levels | tombstoned | `{_id: "hashed"}` (the discussion) |
//! | [`HybridPages`] | 2 commands (more when a page fills) | one `find` of one or two pages | no | tombstoned | `{discussion_id: 1, page: 1}` |
//!
//! (Counts are for MongoDB. On servers whose updates are not atomic, each write also takes and
//! releases a lock document: 2 more commands.)
//!
//! # Which strategy to choose
//!
//! - **[`PerComment`]** when discussions can grow without bound, or comments are edited,
//!   moderated and linked to one by one: every comment is its own small document, found by its
//!   slug in one indexed query. Reading a page is one indexed range scan in either view.
//! - **[`Embedded`]** when discussions stay small (hundreds of comments) and are read far more
//!   than written: the whole discussion, threads included, is one document, so rendering it is
//!   one read. It stops at the 16 MiB document limit with [`Invalid::TooLarge`](crate::error::Invalid::TooLarge) (of the `"discussion"`).
//! - **[`HybridPages`]** for long, flat (unthreaded) discussions read page by page: about 100
//!   comments per document keeps reads to one or two documents and has no size ceiling.
//!
//! # Shared model
//!
//! Every comment has a `link`: a string that addresses it within its discussion (a slug path in
//! [`PerComment`], a position path such as `0.2.1` in [`Embedded`], a slug in [`HybridPages`]).
//! Links are stable: they never change and never come to point at another comment, which is why
//! [`Embedded`] and [`HybridPages`] delete by tombstone (the text is removed and the comment is
//! marked deleted, keeping its place) rather than by shifting array elements.
//!
//! Pages are the crate's keyset pages ([`crate::page`]): an [`Order`] (which top-level comments
//! come first) and a [`PageRequest`](crate::PageRequest) in, a [`Page`](crate::Page) of comments
//! and an opaque [`crate::Cursor`] out. Comments posted while a reader pages through a discussion
//! never cause a repeat or a gap in what follows the cursor.
//!
//! Counts ([`CommentStore::count`]) are of comments not deleted, and stay exact under concurrent
//! posting and deleting.
//!
//! # Votes and sorts (Reddit's model)
//!
//! Every strategy takes up and down votes ([`VotedComments`], which every [`CommentStore`] is):
//! one per user per comment, changeable and retractable, in their own collection
//! (`comment_votes`, `{_id: {discussion, comment, user}, value: 1 | -1, ...}`); each comment
//! carries its [`Votes`] where the strategy stores it, exact under concurrent voters and across
//! failures (the vote document is a journal, see [`VotedComments`]). Comments are ranked by
//! [`Sort::Best`] (the Wilson lower bound at 95 %), [`Sort::Hot`], [`Sort::Top`] and
//! [`Sort::Controversial`], a level at a time ([`VotedComments::ranked`]: the top-level comments,
//! or the replies of one comment), in keyset pages.
//!
//! | strategy | vote (MongoDB) | where counts live | a ranked page | index entries per comment |
//! |---|---|---|---|---|
//! | [`PerComment`] | 5: `find` the comment, `insert` or `update` the vote, `findAndModify` `$inc` of the comment's counts, `update` of its four stored sort keys, `update` clearing the vote's mark | on the comment document, with its stored keys `best`, `hot`, `top`, `controversial` | 1 `find` on `{discussion_id, parent, <key>: -1, full_slug}`, `limit + 1` entries read | 4 more (one per sort), each rewritten by a vote |
//! | [`Embedded`] | 4: `find` (the thread), vote, `update` `$inc` of the element's counts, clear | on the embedded element | 1 `find` of the whole document (top level) or of one thread (replies, `$slice` where the server has it); sorted here | none |
//! | [`HybridPages`] | 4: `find` the page, vote, `update` `$inc` of the element's counts, clear | on the page's element | 1 `find` of every page of the discussion; sorted here | none |
//!
//! A vote is tried as a first vote (an `insert`); a change of the user's vote costs 2 commands
//! more (the `insert` meets their vote, which is read, then `update`d), a retraction 1 more, the
//! same vote again 3 in all. On servers without atomic updates a vote runs under
//! the discussion's lock, as the strategy's edits do: 2 more commands. The in-memory
//! sorts ([`Embedded`], [`HybridPages`]) read every comment of the level they rank (all of the
//! discussion's, for [`HybridPages`]) on every page, so their cost grows with the discussion;
//! [`PerComment`]'s is a range of an index whatever the discussion's size.

mod body;
pub(crate) mod cursor;
mod embedded;
pub(crate) mod engine;
mod hybrid;
mod keyed;
mod lock;
mod model;
mod order;
mod per_comment;
mod ranking;
mod registry;
mod reply_notifications;
mod slug;
mod strategy;
mod traits;
pub mod transfer;
mod tree;
mod validate;
mod votes;

pub use embedded::{Embedded, EmbeddedBuilder};
pub use hybrid::{HybridPages, HybridPagesBuilder};
pub use model::{Author, Comment, Deletion, HeldComment, NewComment, Thread};
pub use order::Order;
pub use per_comment::{PerComment, PerCommentBuilder};
pub use ranking::{Sort, Vote, Votes};
pub use strategy::{Features, Strategy};
pub(crate) use traits::ranked_levels;
pub use traits::{CommentStore, DynCommentStore, ThreadedComments, VotedComments};
pub(crate) use transfer::threads_unsupported;
pub use transfer::{CommentTransfer, DynCommentTransfer};

use keyed::KeyedComment;
use lock::discussion_lock;
use reply_notifications::{check_reply_target, notify_reply, reply_to_withdraw};
