//! Moving a running application from one inbox strategy to another, without stopping writes.
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
//!
//! # What it does not do
//!
//! The target must be empty when the migration starts (checked). Writers that do not go
//! through the migrating store (another process still on the source store alone) are not seen:
//! deploy it everywhere first. A write the target refused after the source took it leaves the
//! owner to be copied again (its reads go back to the source meanwhile) rather than failing the
//! caller. `prune` marks its owner for a new copy, since retention drops different messages in
//! different strategies (buckets drop whole buckets).

mod engine;
mod inbox;
mod mirror;
mod state;

pub use engine::Reads;
pub use inbox::{InboxMigration, InboxMigrationBuilder, Progress};
pub use mirror::MigratingInbox;
