//! Keyset pages, the one shape of every paged read in the crate: a [`PageRequest`] in, a
//! [`Page`] out, and an opaque [`Cursor`] from one to the next.
//!
//! Inbox pages, comment views, the follow graph's lists, feeds, search results and timelines all
//! read this way:
//!
//! ```no_run
//! # async fn demo(inbox: &mongo_social::DynInboxStore<String>) -> mongo_social::Result<()> {
//! use mongo_social::{Cursor, PageRequest};
//!
//! let first = inbox.inbox_page("bob", PageRequest::first(20)).await?;
//! if let Some(next) = first.next {
//!     let text = next.to_string(); // to a URL or an API response, and back:
//!     let cursor: Cursor = text.parse()?;
//!     let second = inbox.inbox_page("bob", PageRequest::after(20, cursor)).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! A page continues strictly after the last item of the previous one (a keyset, never a `skip`),
//! so items added while a reader pages through neither shift nor repeat what follows.
//!
//! # Cursors
//!
//! A cursor is text, safe in a URL without escaping. It names the kind of page that made it (a
//! tag: the store, and where it matters the strategy, view and order), the format's version,
//! the position (each store's own: a send time and id, a place in a bucket, a sort path, a
//! score), and a checksum. Parsing ([`str::parse`]) refuses text that is not a whole, unaltered
//! cursor of this version with [`Invalid::Cursor`]; a store refuses, with the same error, a
//! cursor made by another store, strategy, view or order than the read it is given to, and a
//! position that cannot be its own. The checksum catches damage and hand edits; it is not a
//! signature (a cursor holds nothing secret, and whoever forges one only chooses where a page
//! they could read anyway begins). Treat the text as opaque: the format may change between
//! versions of the crate, and cursors of an older format are then refused.

use crate::error::Invalid;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Which page of a paged read to return: how many items, and after which cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items (1 to [`PageRequest::MAX_LIMIT`]).
    pub limit: usize,
    /// Continue after the page that returned this cursor; `None` for the first page.
    pub after: Option<Cursor>,
}

impl PageRequest {
    /// The largest page any store returns in one call.
    pub const MAX_LIMIT: usize = 10_000;

    /// The first `limit` items.
    ///
    /// ```
    /// use mongo_social::PageRequest;
    /// let first = PageRequest::first(20);
    /// assert_eq!((first.limit, first.after), (20, None));
    /// ```
    pub fn first(limit: usize) -> Self {
        Self { limit, after: None }
    }

    /// The `limit` items that follow the page which returned `cursor`.
    pub fn after(limit: usize, cursor: Cursor) -> Self {
        Self {
            limit,
            after: Some(cursor),
        }
    }

    /// Fails with [`Invalid::PageLimit`](crate::error::Invalid::PageLimit) unless `1 <= limit <= MAX_LIMIT`.
    pub(crate) fn check(&self) -> Result<()> {
        crate::validate::page_limit(self.limit, Self::MAX_LIMIT)
    }

    /// How many items a store reads to fill this page and learn whether another follows.
    pub(crate) fn fetch(&self) -> usize {
        self.limit + 1
    }
}

/// One page of a paged read, in the read's order, and the cursor to the next page if there is
/// one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    /// The items on this page.
    pub items: Vec<T>,
    /// Pass to [`PageRequest::after`] for the next page; `None` on the last page.
    pub next: Option<Cursor>,
}

impl<T> Page<T> {
    /// The same page with each item converted by `f`; the cursor is unchanged.
    ///
    /// ```
    /// use mongo_social::Page;
    /// let page = Page { items: vec![1, 2], next: None };
    /// assert_eq!(page.map(|n| n * 10).items, [10, 20]);
    /// ```
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            next: self.next,
        }
    }

    /// A page from up to `limit + 1` items already in the read's order: the first `limit`, and
    /// when more followed, the cursor `after` makes from the last of them.
    pub(crate) fn from_overfetch(
        mut items: Vec<T>,
        limit: usize,
        after: impl FnOnce(&T) -> Cursor,
    ) -> Self {
        let more = items.len() > limit;
        items.truncate(limit);
        let next = match items.last() {
            Some(last) if more => Some(after(last)),
            _ => None,
        };
        Page { items, next }
    }
}

/// Where the next page starts: obtained from [`Page::next`], passed back in
/// [`PageRequest::after`]. It can be stored as text (`Display`, [`Cursor::as_str`]) and parsed
/// back (`FromStr`); see the [module docs](self) for what it holds and when it is refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cursor(String);

/// The format's version, the first part of every cursor.
const VERSION: &str = "v1";

impl Cursor {
    /// The cursor as text, for a URL or an API response.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A cursor of the kind of page `tag` names (ASCII lowercase letters and digits), at the
    /// position `fields`.
    pub(crate) fn new(tag: &str, fields: &[&str]) -> Self {
        debug_assert!(is_tag(tag), "cursor tag {tag:?}");
        let mut text = format!("{VERSION}.{tag}");
        for field in fields {
            text.push('.');
            escape_into(&mut text, field);
        }
        let check = checksum(&text);
        text.push_str(&format!(".{check:08x}"));
        Self(text)
    }

    /// The position of a cursor made by [`Cursor::new`] with `tag` and `N` fields.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor of another tag or with another number of fields.
    pub(crate) fn fields<const N: usize>(&self, tag: &str) -> Result<[String; N]> {
        let (own, fields) = decode(&self.0)?;
        if own != tag {
            return Err(invalid(
                "made by another store, strategy, view or order than this read's",
            ));
        }
        fields
            .try_into()
            .map_err(|_| invalid("not a position of this kind of page"))
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Cursor {
    type Err = Error;

    /// Accepts the text of any cursor of this version, whole and unaltered; whether it belongs
    /// to a read is checked when it is given to one.
    fn from_str(s: &str) -> Result<Self> {
        decode(s)?;
        Ok(Self(s.to_owned()))
    }
}

impl Cursor {
    /// Every field of a cursor made by [`Cursor::new`] with `tag`, however many.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor of another tag.
    pub(crate) fn all_fields(&self, tag: &str) -> Result<Vec<String>> {
        let (own, fields) = decode(&self.0)?;
        if own != tag {
            return Err(invalid("made by another store or view than this one's"));
        }
        Ok(fields)
    }
}

/// [`Invalid::Cursor`](crate::error::Invalid::Cursor) with `reason`.
pub(crate) fn invalid(reason: &str) -> Error {
    Error::InvalidInput(Invalid::Cursor {
        reason: reason.to_owned(),
    })
}

/// A time field: milliseconds since the Unix epoch, as [`bson::DateTime`] keeps it.
pub(crate) fn time_field(time: bson::DateTime) -> String {
    time.timestamp_millis().to_string()
}

/// The time in a field made by [`time_field`].
pub(crate) fn parse_time(field: &str) -> Result<bson::DateTime> {
    field
        .parse()
        .map(bson::DateTime::from_millis)
        .map_err(|_| invalid("bad time"))
}

/// The id in a field holding an [`bson::oid::ObjectId`] as hex.
pub(crate) fn parse_id(field: &str) -> Result<bson::oid::ObjectId> {
    bson::oid::ObjectId::parse_str(field).map_err(|_| invalid("bad id"))
}

/// The tag and fields of cursor text: `v1.<tag>.<field>...<field>.<checksum>`.
fn decode(text: &str) -> Result<(&str, Vec<String>)> {
    let (body, check) = text
        .rsplit_once('.')
        .ok_or_else(|| invalid("not a cursor"))?;
    if check != format!("{:08x}", checksum(body)) {
        return Err(invalid("damaged or altered: its checksum does not match"));
    }
    let mut parts = body.split('.');
    if parts.next() != Some(VERSION) {
        return Err(invalid("made by another version of the crate"));
    }
    let tag = parts
        .next()
        .filter(|tag| is_tag(tag))
        .ok_or_else(|| invalid("not a cursor"))?;
    let fields = parts.map(unescape).collect::<Result<Vec<String>>>()?;
    if fields.is_empty() {
        return Err(invalid("not a cursor"));
    }
    Ok((tag, fields))
}

fn is_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Bytes a field keeps as they are: URL-safe, and not the separator `.` or the escape `%`.
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'~')
}

/// Appends `field` with every other byte as `%XX`.
fn escape_into(text: &mut String, field: &str) {
    for byte in field.bytes() {
        if is_plain(byte) {
            text.push(char::from(byte));
        } else {
            text.push_str(&format!("%{byte:02X}"));
        }
    }
}

/// The field [`escape_into`] wrote.
fn unescape(field: &str) -> Result<String> {
    let bad = || invalid("bad escape in a cursor");
    let mut bytes = Vec::with_capacity(field.len());
    let mut rest = field.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail.get(..2).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            bytes.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            rest = &tail[2..];
        } else if is_plain(byte) {
            bytes.push(byte);
            rest = tail;
        } else {
            return Err(bad());
        }
    }
    String::from_utf8(bytes).map_err(|_| bad())
}

/// 32-bit FNV-1a of `text`.
fn checksum(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(result: Result<impl fmt::Debug>) -> String {
        match result {
            Err(Error::InvalidInput(Invalid::Cursor { reason })) => reason,
            other => panic!("expected InvalidCursor, got {other:?}"),
        }
    }

    #[test]
    fn round_trips_through_text() {
        for fields in [
            vec!["1700000000123", "65a0b0c0d0e0f00112233445"],
            vec!["ann"],
            vec![""],
            vec!["a.b", "100%", "x/y z", "Ünïcödé 名前", "0.2.1"],
        ] {
            let cursor = Cursor::new("xy1", &fields);
            let text = cursor.to_string();
            assert!(text.bytes().all(|b| is_plain(b) || b == b'.' || b == b'%'));
            let parsed: Cursor = text.parse().unwrap();
            assert_eq!(parsed, cursor);
            assert_eq!(parsed.as_str(), text);
            let expected: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
            match fields.len() {
                1 => assert_eq!(parsed.fields::<1>("xy1").unwrap().to_vec(), expected),
                2 => assert_eq!(parsed.fields::<2>("xy1").unwrap().to_vec(), expected),
                _ => assert_eq!(parsed.fields::<5>("xy1").unwrap().to_vec(), expected),
            }
        }
    }

    #[test]
    fn a_cursor_of_another_tag_is_refused() {
        let cursor = Cursor::new("ir", &["1", "2"]);
        for other in ["iw", "i", "irr", "g"] {
            assert!(reason(cursor.fields::<2>(other)).contains("another store"));
        }
        assert!(reason(cursor.fields::<1>("ir")).contains("not a position"));
        assert!(reason(cursor.fields::<3>("ir")).contains("not a position"));
        assert_eq!(cursor.fields::<2>("ir").unwrap(), ["1", "2"]);
    }

    #[test]
    fn tampered_or_truncated_cursors_are_refused() {
        let cursor = Cursor::new("ib", &["4242"]);
        let text = cursor.as_str();
        // Any one character changed, or the text cut anywhere, is refused.
        for at in 0..text.len() {
            let mut tampered = text.as_bytes().to_vec();
            tampered[at] = if tampered[at] == b'1' { b'2' } else { b'1' };
            let tampered = String::from_utf8(tampered).unwrap();
            assert!(tampered.parse::<Cursor>().is_err(), "{tampered:?}");
            assert!(text[..at].parse::<Cursor>().is_err(), "{:?}", &text[..at]);
        }
        // Rewritten with a consistent checksum but broken inside: refused all the same.
        for body in [
            "v2.ib.4242",
            "v1.IB.4242",
            "v1..4242",
            "v1.ib",
            "v1.ib.%4",
            "v1.ib.a b",
        ] {
            let forged = format!("{body}.{:08x}", checksum(body));
            assert!(forged.parse::<Cursor>().is_err(), "{forged:?}");
        }
        for text in [
            "",
            "garbage",
            "b.17",
            "r.1700000000000.65a0b0c0d0e0f00112233445",
        ] {
            reason(text.parse::<Cursor>());
        }
    }

    #[test]
    fn pages_from_one_extra_item() {
        let after = |n: &u32| Cursor::new("t", &[&n.to_string()]);
        let page = Page::from_overfetch(vec![1, 2, 3], 2, after);
        assert_eq!(page.items, [1, 2]);
        assert_eq!(page.next.unwrap().fields::<1>("t").unwrap(), ["2"]);
        let last = Page::from_overfetch(vec![1, 2], 2, after);
        assert_eq!((last.items, last.next), (vec![1, 2], None));
        assert!(PageRequest::first(PageRequest::MAX_LIMIT).check().is_ok());
        for limit in [0, PageRequest::MAX_LIMIT + 1] {
            assert!(matches!(
                PageRequest::first(limit).check(),
                Err(Error::InvalidInput(Invalid::PageLimit { .. }))
            ));
        }
    }
}
