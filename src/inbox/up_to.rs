//! How far [`super::InboxLifecycle::mark_read_up_to`] marks.

use super::MessageId;
use crate::page::Cursor;

/// How far [`InboxLifecycle::mark_read_up_to`](super::InboxLifecycle::mark_read_up_to) marks: a message and every message older than it
/// in the owner's inbox (below it, in the inbox's newest-first order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpTo {
    /// This message and every older one.
    Message(MessageId),
    /// The message a page's cursor ([`crate::Page::next`]) follows (the last message of that
    /// page) and every older one. A cursor of another owner's inbox, or of another strategy,
    /// is refused with [`Invalid::Cursor`](crate::error::Invalid::Cursor).
    Cursor(Cursor),
    /// Every message in the inbox when the call is made.
    Newest,
}
