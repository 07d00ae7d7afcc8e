//! Not a stable part of the API: what this repository's test lab needs from the inside of the
//! crate, to check that every store refuses a cursor it did not make and to size its checks.
//! Hidden from the docs; may change in any release.

use crate::page::Cursor;

/// The most keys one locked round of a store's writes takes, where writers take turns.
pub const LOCKED_ROUND: usize = crate::backend::LOCKED_ROUND;

/// A cursor with `tag` and `fields`, bound to `owner`'s inbox.
pub fn inbox_cursor(tag: &str, owner: &str, fields: &[&str]) -> Cursor {
    Cursor::new(tag, crate::inbox::cursor::scope(owner), fields)
}

/// A cursor with `tag` and `fields`, bound to `discussion`'s pages.
pub fn discussion_cursor(tag: &str, discussion: &str, fields: &[&str]) -> Cursor {
    Cursor::new(tag, crate::comments::cursor::discussion(discussion), fields)
}
