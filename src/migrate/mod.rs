//! Moving a running application from one inbox strategy to another, or one comment strategy to
//! another, without stopping writes. Both migrations run on one engine (phases, a per-unit
//! copy on the job queue with dirty marks and verification, reads moved per unit or all at
//! once, progress, finish and abort): a unit is an owner's inbox for [`InboxMigration`], a
//! discussion for [`CommentMigration`] (see [Comments](#comments)).
//!
//! Every strategy is a trade-off that shifts as an application grows (fan out on read for a
//! young app, buckets once inboxes are long). An [`InboxMigration`] moves every owner's inbox
//! from a source store to a target store of any other strategy while the application keeps
//! sending, reading, marking, deleting, retracting, editing, muting and blocking:
//!
//! 1. **Dual writes.** The application uses [`InboxMigration::store`] in place of the source
//!    from the start. Every write goes to the source first (the source stays whole, the system
//!    of record until the end), then to the target for each owner whose copy is done.
//! 2. **A resumable copy**, on the crate's job queue ([`InboxMigration::start`],
//!    [`InboxMigration::run_pending`] or [`InboxMigration::start_worker`]): one job lists the
//!    source's owners (checkpointed), one job per owner copies that owner's inbox: it empties
//!    the owner's inbox in the target, imports the source's export ([`InboxTransfer`](crate::inbox::InboxTransfer): every
//!    message with its read state, stars, deletions, retractions, edits and hidden senders), the
//!    owner's mute and block lists, then **verifies** the copy (counts, unread counts, newest and
//!    oldest ids, and every message's state, compared) and marks the owner `ready`. A write for
//!    an owner being copied meanwhile marks it dirty, and a dirty or unverified copy is done
//!    again; a job killed at any point runs again from the start of its owner, which leaves
//!    each message once.
//! 3. **Reads move** per owner as soon as the owner is ready ([`Reads::PerOwner`]), or all at
//!    once when [`InboxMigration::cut_over`] is called after every owner is
//!    ([`Reads::AllAtOnce`]). A page cursor made by the source before the move is still
//!    honoured (its page is read from the source, which is whole) until
//!    [`InboxMigration::finish`]; after it, the target refuses it with
//!    [`Invalid::Cursor`](crate::error::Invalid::Cursor).
//! 4. **Finish or abort.** [`InboxMigration::finish`] (every owner ready) stops writing the
//!    source: the application then uses the target store directly. [`InboxMigration::abort`]
//!    stops the dual writes and empties the target; the source, written all along, is whole.
//!
//! [`InboxMigration::progress`] says how far the copy has got: owners ready and in all,
//! messages copied, the rate and the time left.
//!
//! # What it costs
//!
//! - Every write through the migrating store: the source's commands, one `find` of the owners'
//!   migration state, and the target's commands for the owners that are ready; for owners
//!   being copied, one `update` marking them dirty instead. A retraction or edit (which reaches
//!   every recipient) also moves the migration's epoch, one `update`, so that a copy running
//!   meanwhile is checked again.
//! - Every read: one `find` of the owner's state (per owner), or none (all at once, the phase is
//!   read at most once a second), then the read on the store it goes to.
//! - The copy, per owner: the target's purge of the owner, one `find` of the source's inbox
//!   (read in batches), one import per 500 messages, the lists, and for verification one more
//!   export of each side and their counts.
//! - Where the server's updates are not atomic, each update of a state document
//!   (a dirty mark, a copy's start and finish, the epoch, the listing, the phase) also takes
//!   that document's turn: an `insert` and a `delete` in `<name>_locks`. Elsewhere, nothing.
//!
//! # What it does not do
//!
//! The target must be empty when the migration starts (checked). Writers that do not go
//! through the migrating store (another process still on the source store alone) are not seen:
//! deploy it everywhere first. A write the target refused after the source took it leaves the
//! owner to be copied again (its reads go back to the source meanwhile) rather than failing the
//! caller. `prune` marks its owner for a new copy, since retention drops different messages in
//! different strategies (buckets drop whole buckets).
//!
//! # Comments
//!
//! A [`CommentMigration`] moves discussions (every one, or those
//! [`CommentMigrationBuilder::discussions`] lists) between [`PerComment`], [`Embedded`] and
//! [`HybridPages`], in the same four steps, through [`MigratingComments`]; a unit is a
//! discussion. Its copy exports the discussion from the source
//! ([`CommentTransfer`]: every comment by posting time, parents before replies, with its
//! author, text, posting and edit times, tombstone, counts, and every user's vote), imports it
//! into the target (which replaces what the target held of it: a copy cut off anywhere and run
//! again leaves each comment once), records each comment's pair of links, and verifies the
//! target's export against the source's (the same comments in the same order, field by field,
//! each target link the one recorded).
//!
//! **Supported pairs.** All six pairs of different strategies, and a strategy into another
//! store of itself. A discussion with replies cannot go into [`HybridPages`], which has no
//! threads: [`CommentMigration::start`] refuses the migration with
//! [`Error::Unsupported`](crate::Error::Unsupported) (`"replies"`, naming the discussion)
//! before anything is written, so [`PerComment`] or [`Embedded`] into [`HybridPages`] works
//! where no discussion has a reply. While the target has no threads the migrating store does
//! not thread either ([`CommentStore::threaded`](crate::comments::CommentStore::threaded) is
//! `None`, `reply` is refused before anything is written).
//!
//! **Links.** A link is each strategy's own (a slug path, a position path, a slug), and links
//! given out before the move live on in URLs and notifications. Where the target can keep a
//! link (a store of the same strategy) the import keeps it; otherwise the comment gets a new
//! one and the migration's **link map** (`<name>_links`: discussion, source link, target link)
//! records the pair, on the copy and on every post and reply the target takes. Until
//! [`CommentMigration::finish`] the migrating store speaks the source's links only: it
//! translates those it is given into the target's for the target's writes and reads, and the
//! target's back in what it reads there (pages, parents, single comments). After the finish it
//! gives the target's links, and takes both: a link the map holds is translated, any other is
//! taken as the target's. So old links keep working as long as the application reads through
//! [`CommentMigration::store`]; the target store used alone knows only its own links (an old
//! one is [`Error::NotFound`](crate::Error::NotFound) there, or
//! [`Invalid::Link`](crate::error::Invalid::Link) where it has another shape). Cursors are
//! handled as for inboxes: a source cursor is read from the source until the finish, then
//! refused with [`Invalid::Cursor`](crate::error::Invalid::Cursor).
//!
//! **Order.** A write to a discussion being moved takes the discussion's lock
//! (`<name>_locks`) for both stores' writes, so the target takes posts and replies in the
//! source's order and the chronological and threaded views agree. Each store keeps its own
//! rules for what it is given: a post written to both is stamped by each store's clock (its
//! `posted` may differ by the time between the two writes; copied comments keep theirs
//! exactly), and a delete that [`PerComment`] answers by removing a leaf leaves a tombstone in
//! [`Embedded`] or [`HybridPages`], as their deletes do. Idempotency keys do not travel (see
//! [`CommentTransfer`]): a keyed post repeated after the move, of a comment copied rather than
//! dual-written, posts again in the target.
//!
//! **Scope.** With [`CommentMigrationBuilder::discussions`] only those discussions move: the
//! others stay on the source for reads and writes, before and after the finish, and an abort
//! removes only the listed discussions from the target (which may hold others).
//!
//! ## What it costs
//!
//! - Every write through [`MigratingComments`] to a discussion being moved: the source's
//!   commands, 2 for the discussion's lock (an `insert`, a `delete`), one `find` of the
//!   discussion's state, and then: for a discussion being copied, one `update` marking it
//!   dirty; for one that is ready, 1 `find` of the link map (the comment's, or the parent's,
//!   target link; none for a post), the target's commands, and for a post or reply one
//!   `insert` into the map. Writes to discussions not moved cost the source's commands alone.
//! - Every read: one `find` of the discussion's state (per discussion), or none (all at once);
//!   then the read on its store, and where it reads the target before the finish, one `find`
//!   of the link map for a link given and one for the links of what it read.
//! - The copy, per discussion: the source's export (1 `find` of its comments, pages or
//!   document; 1 of its votes; and the votes' settling, 1 `find`), 1 `delete` of the map's
//!   pairs, the target's import (1 `delete` each of its comments and votes, 1 `insert` per 500
//!   comments for [`PerComment`], one `update` of the whole document for [`Embedded`], one
//!   `insert` of every page for [`HybridPages`], 1 `insert` of the votes), 1 `insert` per
//!   1,000 pairs of links, and for verification one more export of each side and 1 `find` of
//!   the map. Per comment: its share of those batches, about 3 documents written (the comment,
//!   its pair of links, each vote) and 4 read (two exports of each side).
//!
//! [`PerComment`]: crate::comments::PerComment
//! [`Embedded`]: crate::comments::Embedded
//! [`HybridPages`]: crate::comments::HybridPages
//! [`CommentTransfer`]: crate::comments::CommentTransfer

mod comments;
mod engine;
mod handle;
mod inbox;
mod links;
mod state;
mod units;

pub use comments::{CommentMigration, CommentMigrationBuilder, CommentProgress, MigratingComments};
pub use engine::Reads;
pub use inbox::{InboxMigration, InboxMigrationBuilder, MigratingInbox, Progress};
