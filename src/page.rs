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
//! A cursor is text made only of characters that are unreserved in a URL (RFC 3986: `A`-`Z`,
//! `a`-`z`, `0`-`9`, `-`, `.`, `_`, `~`), so it goes into a path segment or a query string
//! without escaping, and a URL or form decoder (`%XX` and `+` are the only things they change)
//! gives it back unchanged; whatever escaping an encoder chooses to add, its decoder takes off.
//! It reads `v2.<tag>.<scope>.<field>...<field>.<checksum>`:
//!
//! - the format's version (`v2`);
//! - a tag naming the kind of page that made it: the store, and where it matters the strategy,
//!   view and order (the table below);
//! - the scope of the read that made it, a 64-bit hash (16 hex digits) of what the read was
//!   asked for: the discussion, the inbox's owner, the feed, the list, the recipient, the search
//!   terms (the table below);
//! - the position, each store's own (a send time and id, a place in a bucket, a sort path, a
//!   score), one field each, in which every byte but `A`-`Z`, `a`-`z`, `0`-`9`, `-` and `_`
//!   is written `~XX` (its two uppercase hex digits), so no field holds a `.` or a character
//!   outside that set whatever it holds (a user id, a link, a nested token);
//! - a checksum (32-bit FNV-1a of the rest, 8 hex digits).
//!
//! Parsing ([`str::parse`]) refuses text that is not a whole, unaltered cursor of this version
//! with [`Invalid::Cursor`]. A store refuses, with the same error, a cursor made by another
//! store, strategy, view or order than the read it is given to; a cursor made for another scope
//! (another discussion, owner, feed, list, recipient, search, watch: the reason says which); and
//! a position that cannot be its own. The checksum catches damage and hand edits; it is not a
//! signature, nor is the scope's hash (a cursor holds nothing secret, and whoever forges one only
//! chooses where a page they could read anyway begins). Treat the text as opaque: the format may
//! change between versions of the crate, and cursors of an older format are then refused
//! ("made by another version of the crate"; `v1` cursors, which were not scoped and escaped with
//! `%`, since this crate's `v2`).
//!
//! Every tag, where it comes from, what it holds and what it is bound to:
//!
//! | tag | store: read | fields (the position) | scope |
//! |---|---|---|---|
//! | `ir`, `iw` | [`FanOutOnRead`](crate::FanOutOnRead), [`FanOutOnWrite`](crate::FanOutOnWrite): [`inbox_page`](crate::InboxStore::inbox_page), [`mark_read_up_to`](crate::inbox::InboxLifecycle::mark_read_up_to); [`Delivery::timeline`](crate::Delivery::timeline) over such an inbox | send time (ms), message id | the inbox's owner |
//! | `ib` | [`BucketedFanOut`](crate::BucketedFanOut): the same reads | position in the inbox | the inbox's owner |
//! | `cpco`, `cpcn`, `ceco`, `cecn` | [`PerComment`](crate::PerComment), [`Embedded`](crate::Embedded): [`chronological`](crate::CommentStore::chronological), oldest (`o`) or newest (`n`) first | posting time (ms), comment id | the discussion |
//! | `chco`, `chcn` | [`HybridPages`](crate::HybridPages): [`chronological`](crate::CommentStore::chronological) | page, index in the page | the discussion |
//! | `cpto`, `cptn`, `ceto`, `cetn` | [`PerComment`](crate::PerComment), [`Embedded`](crate::Embedded): [`thread_page`](crate::comments::ThreadedComments::thread_page) | sort key (`PerComment`), position path (`Embedded`) | the discussion |
//! | `cpso`, `ceso` | [`PerComment`](crate::PerComment), [`Embedded`](crate::Embedded): [`sub_thread`](crate::comments::ThreadedComments::sub_thread) | sort key, position path | the discussion and the sub-thread's root (its link) |
//! | `c` + `p`/`e`/`h` + `r` + `b`/`h`/`t`/`c` | each comment strategy: [`ranked`](crate::comments::VotedComments::ranked) by [`Sort`](crate::comments::Sort) (best, hot, top, controversial) | parent's link (`-`: the top level), sort key, place among equal keys | the discussion |
//! | `ff` | [`Feeds::page`](crate::feed::Feeds::page) | score (IEEE-754 bits, hex), post id, the feed's generation | the feed (latest, hot, a user's) |
//! | `fb`, `fn` | [`Search::page`](crate::feed::Search::page), best match or newest first | score and post id; creation time (ms) and post id | the search terms |
//! | `g` | [`FollowGraph`](crate::FollowGraph): [`following`](crate::FollowGraph::following), [`followers`](crate::FollowGraph::followers), [`members`](crate::FollowGraph::members), [`blocked`](crate::FollowGraph::blocked); [`Delivery`](crate::Delivery)'s fan-out jobs (followers) | the last user id | the list: whose following or followers, which group's members, whose block list |
//! | `gr` | [`FollowGraph::recommendations`](crate::FollowGraph::recommendations) | score, user id | the reader |
//! | `ng` | [`NotificationStore::page`](crate::NotificationStore::page) | newest event's time (ms), group id | the recipient |
//! | `w` | a [`ResumeToken`](crate::realtime::ResumeToken) of a watch: an inbox's, notifications', a feed's, a timeline's celebrities | change stream token (hex), newest key, floor key, keys reported within the lookback | the watch: its store, view and owner |
//! | `wpair` | a [`ResumeToken`](crate::realtime::ResumeToken) of [`Delivery::watch_timeline`](crate::Delivery::watch_timeline) | its two watches' tokens, start time (ms) | the timeline's owner |

use crate::error::Invalid;
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

    /// Where this page starts: the cursor it continues after, decoded by `decode` (which
    /// fails with [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor not of the
    /// read), or `None` for the first page.
    pub(crate) fn decode_after<T>(
        &self,
        decode: impl FnOnce(&Cursor) -> Result<T>,
    ) -> Result<Option<T>> {
        self.after.as_ref().map(decode).transpose()
    }

    /// How many items a store reads to fill this page and learn whether another follows.
    pub(crate) fn fetch(&self) -> usize {
        self.limit + 1
    }
}

/// One page of a paged read, in the read's order, and the cursor to the next page if there is
/// one.
///
/// It serializes (serde) as `{"items": [...], "next": "<cursor>"}`, `next` the [`Cursor`]'s
/// text or `null` on the last page, as an API returns it; deserializing checks the cursor
/// as [`Cursor`]'s `FromStr` does.
///
/// ```
/// use mongo_social::Page;
/// let last: Page<u32> = Page { items: vec![1, 2], next: None };
/// let json = serde_json::to_string(&last).unwrap();
/// assert_eq!(json, r#"{"items":[1,2],"next":null}"#);
/// assert_eq!(serde_json::from_str::<Page<u32>>(&json).unwrap(), last);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
///
/// With serde it is its text: it serializes as a string, and deserializes from one by parsing
/// it, so a query string or a JSON body holding a damaged or altered cursor is refused where it
/// is decoded (by `FromStr`'s [`Invalid::Cursor`], as the deserializer's error), and one
/// holding a cursor of another store or scope when it is given to a read.
///
/// ```
/// # fn demo(cursor: mongo_social::Cursor) {
/// #[derive(serde::Deserialize)]
/// struct PageQuery {
///     limit: Option<usize>,
///     after: Option<mongo_social::Cursor>, // `?after=<cursor>`, checked as it is decoded
/// }
/// let json = serde_json::to_string(&cursor).unwrap(); // "\"v2.iw....\""
/// assert_eq!(serde_json::from_str::<mongo_social::Cursor>(&json).unwrap(), cursor);
/// assert!(serde_json::from_str::<mongo_social::Cursor>(r#""v2.iw.tampered""#).is_err());
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cursor(String);

/// The format's version, the first part of every cursor.
const VERSION: &str = "v2";

/// What a cursor is bound to: the scope of the read that made it (a discussion, an inbox's
/// owner, a feed, ...), kept in the cursor as a hash. A read of another scope refuses it with a
/// reason naming `what`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scope {
    /// What the scope is, in words ("discussion", "owner's inbox", ...).
    what: &'static str,
    /// 64-bit FNV-1a over `what` and the parts, each length-prefixed.
    hash: u64,
}

impl Scope {
    /// The scope `what` named by `parts` (a discussion id; a discussion id and a link; ...).
    pub(crate) fn new(what: &'static str, parts: &[&str]) -> Self {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut add = |bytes: &[u8]| {
            for byte in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
                hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        add(what.as_bytes());
        for part in parts {
            add(part.as_bytes());
        }
        Self { what, hash }
    }

    /// The scope as a cursor field: 16 lowercase hex digits.
    fn field(self) -> String {
        format!("{:016x}", self.hash)
    }
}

impl Cursor {
    /// The cursor as text, for a URL or an API response.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A cursor of the kind of page `tag` names (ASCII lowercase letters and digits), made by a
    /// read of `scope`, at the position `fields`.
    pub(crate) fn new(tag: &str, scope: Scope, fields: &[&str]) -> Self {
        debug_assert!(is_tag(tag), "cursor tag {tag:?}");
        let mut text = format!("{VERSION}.{tag}.{}", scope.field());
        for field in fields {
            text.push('.');
            escape_into(&mut text, field);
        }
        let check = checksum(&text);
        text.push_str(&format!(".{check:08x}"));
        Self(text)
    }

    /// The position of a cursor made by [`Cursor::new`] with `tag`, `scope` and `N` fields.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor of another tag or scope,
    /// or with another number of fields.
    pub(crate) fn fields<const N: usize>(&self, tag: &str, scope: Scope) -> Result<[String; N]> {
        self.all_fields(tag, scope)?
            .try_into()
            .map_err(|_| invalid("not a position of this kind of page"))
    }

    /// Every field of a cursor made by [`Cursor::new`] with `tag` and `scope`, however many.
    ///
    /// # Errors
    ///
    /// [`Invalid::Cursor`](crate::error::Invalid::Cursor) for a cursor of another tag or scope.
    pub(crate) fn all_fields(&self, tag: &str, scope: Scope) -> Result<Vec<String>> {
        let decoded = decode(&self.0)?;
        if decoded.tag != tag {
            return Err(invalid(
                "made by another store, strategy, view or order than this read's",
            ));
        }
        if decoded.scope != scope.field() {
            return Err(invalid(&format!("belongs to another {}", scope.what)));
        }
        Ok(decoded.fields)
    }

    /// Whether the cursor was made with `tag` (whatever its scope).
    pub(crate) fn has_tag(&self, tag: &str) -> bool {
        decode(&self.0).is_ok_and(|decoded| decoded.tag == tag)
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

impl Serialize for Cursor {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Cursor {
    /// Parses the text as `FromStr` does: the deserializer's error carries
    /// [`Invalid::Cursor`]'s message for text that is not a whole, unaltered cursor.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// [`Invalid::Cursor`](crate::error::Invalid::Cursor) with `reason`.
pub(crate) fn invalid(reason: &str) -> Error {
    Error::InvalidInput {
        reason: Invalid::Cursor {
            reason: reason.to_owned(),
        },
    }
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

/// The parts of cursor text.
struct Decoded<'a> {
    tag: &'a str,
    scope: &'a str,
    fields: Vec<String>,
}

/// The tag, scope and fields of cursor text: `v2.<tag>.<scope>.<field>...<field>.<checksum>`.
fn decode(text: &str) -> Result<Decoded<'_>> {
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
    let scope = parts
        .next()
        .filter(|scope| {
            scope.len() == 16
                && scope
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        .ok_or_else(|| invalid("not a cursor"))?;
    let fields = parts.map(unescape).collect::<Result<Vec<String>>>()?;
    if fields.is_empty() {
        return Err(invalid("not a cursor"));
    }
    Ok(Decoded { tag, scope, fields })
}

/// The tag and fields of the text of a cursor of the previous format (`v1`, before cursors were
/// scoped: `v1.<tag>.<field>...<field>.<checksum>`, each field `%`-escaped), if it is one, whole
/// and unaltered: for work queued before an upgrade that stored a cursor, never for a read.
pub(crate) fn v1_fields(text: &str) -> Option<(&str, Vec<String>)> {
    let (body, check) = text.rsplit_once('.')?;
    if check != format!("{:08x}", checksum(body)) {
        return None;
    }
    let mut parts = body.split('.');
    if parts.next() != Some("v1") {
        return None;
    }
    let tag = parts.next().filter(|tag| is_tag(tag))?;
    let fields = parts
        .map(|field| {
            let mut bytes = Vec::with_capacity(field.len());
            let mut rest = field.as_bytes();
            while let Some((&byte, tail)) = rest.split_first() {
                if byte == b'%' {
                    let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
                    bytes.push(u8::from_str_radix(hex, 16).ok()?);
                    rest = &tail[2..];
                } else if is_plain(byte) {
                    bytes.push(byte);
                    rest = tail;
                } else {
                    return None;
                }
            }
            String::from_utf8(bytes).ok()
        })
        .collect::<Option<Vec<String>>>()?;
    (!fields.is_empty()).then_some((tag, fields))
}

fn is_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Bytes a field keeps as they are: unreserved in a URL (RFC 3986), and not the separator `.`
/// or the escape `~`.
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_')
}

/// The escape character: `~XX` is the byte of the two uppercase hex digits `XX`. Unreserved in
/// a URL, unlike `%`, so a URL decoder leaves the escape as it is.
const ESCAPE: u8 = b'~';

/// Appends `field` with every byte that is not [plain](is_plain) as `~XX`: the text holds only
/// URL-unreserved characters (`A-Z a-z 0-9 - _ ~`), and no `.`, which separates fields.
fn escape_into(text: &mut String, field: &str) {
    for byte in field.bytes() {
        if is_plain(byte) {
            text.push(char::from(byte));
        } else {
            text.push(char::from(ESCAPE));
            text.push_str(&format!("{byte:02X}"));
        }
    }
}

/// The field [`escape_into`] wrote; text it could not have written (a plain byte escaped,
/// lowercase hex, a byte neither plain nor escaped) is refused, so each field has one text.
fn unescape(field: &str) -> Result<String> {
    let bad = || invalid("bad escape in a cursor");
    let hex = |digit: u8| match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    };
    let mut bytes = Vec::with_capacity(field.len());
    let mut rest = field.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == ESCAPE {
            let Some(&[high, low]) = tail.get(..2) else {
                return Err(bad());
            };
            let byte = hex(high).zip(hex(low)).ok_or_else(bad)?;
            let byte = byte.0 << 4 | byte.1;
            if is_plain(byte) {
                return Err(bad());
            }
            bytes.push(byte);
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
            Err(Error::InvalidInput {
                reason: Invalid::Cursor { reason },
            }) => reason,
            other => panic!("expected InvalidCursor, got {other:?}"),
        }
    }

    /// Unreserved in a URL (RFC 3986): what a URL decoder leaves as it is.
    fn unreserved(byte: u8) -> bool {
        byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
    }

    const ANN: Scope = Scope {
        what: "owner",
        hash: 1,
    };

    #[test]
    fn round_trips_through_text() {
        let scope = Scope::new("discussion", &["p1"]);
        for fields in [
            vec!["1700000000123", "65a0b0c0d0e0f00112233445"],
            vec!["ann"],
            vec![""],
            vec!["a.b", "100%", "x/y z", "Ünïcödé 名前", "0.2.1"],
            vec![
                "~7E",
                "%2E",
                "+&=?#",
                "2026.12.02.16.17.32.803109:34863f8f",
                "~",
            ],
        ] {
            let cursor = Cursor::new("xy1", scope, &fields);
            let text = cursor.to_string();
            assert!(text.bytes().all(unreserved), "{text}");
            let parsed: Cursor = text.parse().unwrap();
            assert_eq!(parsed, cursor);
            assert_eq!(parsed.as_str(), text);
            let expected: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
            assert_eq!(parsed.all_fields("xy1", scope).unwrap(), expected);
            match fields.len() {
                1 => assert_eq!(parsed.fields::<1>("xy1", scope).unwrap().to_vec(), expected),
                2 => assert_eq!(parsed.fields::<2>("xy1", scope).unwrap().to_vec(), expected),
                _ => assert_eq!(parsed.fields::<5>("xy1", scope).unwrap().to_vec(), expected),
            }
        }
    }

    #[test]
    fn every_byte_of_a_field_stays_url_safe() {
        let scope = Scope::new("discussion", &["p1"]);
        let all: String = (0..=0x7f_u8)
            .map(char::from)
            .chain(['é', '名', '\u{10FFFF}'])
            .collect();
        let cursor = Cursor::new("t", scope, &[&all, "."]);
        assert!(cursor.as_str().bytes().all(unreserved), "{cursor}");
        assert_eq!(
            cursor.fields::<2>("t", scope).unwrap(),
            [all, ".".to_owned()]
        );
    }

    #[test]
    fn a_cursor_of_another_tag_or_scope_is_refused() {
        let bob = Scope::new("owner's inbox", &["bob"]);
        let cursor = Cursor::new("ir", bob, &["1", "2"]);
        for other in ["iw", "i", "irr", "g"] {
            assert!(reason(cursor.fields::<2>(other, bob)).contains("another store"));
        }
        assert!(reason(cursor.fields::<1>("ir", bob)).contains("not a position"));
        assert!(reason(cursor.fields::<3>("ir", bob)).contains("not a position"));
        assert_eq!(cursor.fields::<2>("ir", bob).unwrap(), ["1", "2"]);
        assert!(cursor.has_tag("ir") && !cursor.has_tag("iw"));
        for other in [
            Scope::new("owner's inbox", &["ann"]),
            Scope::new("owner's inbox", &["bo", "b"]),
            Scope::new("owner's inbox", &["bob", ""]),
            Scope::new("owner's inbox", &[]),
            Scope::new("recipient's notifications", &["bob"]),
            ANN,
        ] {
            assert_eq!(
                reason(cursor.fields::<2>("ir", other)),
                format!("belongs to another {}", other.what)
            );
        }
    }

    #[test]
    fn tampered_or_truncated_cursors_are_refused() {
        let scope = Scope::new("owner's inbox", &["bob"]);
        let cursor = Cursor::new("ib", scope, &["4242"]);
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
        let own = scope.field();
        for body in [
            format!("v1.ib.{own}.4242"),
            format!("v3.ib.{own}.4242"),
            format!("v2.IB.{own}.4242"),
            format!("v2..{own}.4242"),
            format!("v2.ib.{own}"),
            "v2.ib.4242".to_owned(),
            "v2.ib.00000000000000zz.4242".to_owned(),
            "v2.ib.0000000000000000f.4242".to_owned(),
            format!("v2.ib.{}.4242", own.to_uppercase()),
            format!("v2.ib.{own}.~4"),
            format!("v2.ib.{own}.~2e"),
            format!("v2.ib.{own}.~41"),
            format!("v2.ib.{own}.~FF"),
            format!("v2.ib.{own}.%2E"),
            format!("v2.ib.{own}.a b"),
        ] {
            let forged = format!("{body}.{:08x}", checksum(&body));
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
    fn cursors_of_the_previous_format_are_refused_and_read_only_for_queued_work() {
        let body = "v1.g.bob%2Esmith";
        let v1 = format!("{body}.{:08x}", checksum(body));
        assert_eq!(
            reason(v1.parse::<Cursor>()),
            "made by another version of the crate"
        );
        assert_eq!(v1_fields(&v1), Some(("g", vec!["bob.smith".to_owned()])));
        let altered = format!("{body}.{:08x}", checksum(body) ^ 1);
        assert_eq!(v1_fields(&altered), None);
        let current = Cursor::new("g", ANN, &["bob"]);
        assert_eq!(v1_fields(current.as_str()), None);
    }

    #[test]
    fn pages_from_one_extra_item() {
        let after = |n: &u32| Cursor::new("t", ANN, &[&n.to_string()]);
        let page = Page::from_overfetch(vec![1, 2, 3], 2, after);
        assert_eq!(page.items, [1, 2]);
        assert_eq!(page.next.unwrap().fields::<1>("t", ANN).unwrap(), ["2"]);
        let last = Page::from_overfetch(vec![1, 2], 2, after);
        assert_eq!((last.items, last.next), (vec![1, 2], None));
        assert!(PageRequest::first(PageRequest::MAX_LIMIT).check().is_ok());
        for limit in [0, PageRequest::MAX_LIMIT + 1] {
            assert!(matches!(
                PageRequest::first(limit).check(),
                Err(Error::InvalidInput {
                    reason: Invalid::PageLimit { .. }
                })
            ));
        }
    }
}
