//! Realtime updates: a stream of the new items of an inbox, a timeline or a notification feed,
//! resumable from a token the caller stores.
//!
//! ```no_run
//! # async fn demo(db: mongodb::Database) -> mongo_social::Result<()> {
//! use futures::StreamExt;
//! use mongo_social::notifications::NotificationStore;
//! use mongo_social::realtime::{ResumeToken, WatchOptions};
//!
//! let notifications: NotificationStore<()> = NotificationStore::new(&db);
//! let saved: Option<ResumeToken> = None; // or the token of the last update handled
//! let mut updates = notifications.watch("ann", saved, WatchOptions::default());
//! while let Some(update) = updates.next().await {
//!     let update = update?;
//!     println!("{} and {} others", update.item.actors[0], update.item.actor_count - 1);
//!     let _store_me: String = update.token.to_string(); // resume from here after a restart
//! }
//! # Ok(()) }
//! ```
//!
//! # Change streams, or polling
//!
//! Where the server has change streams ([`crate::server::Capabilities::change_streams`]: MongoDB
//! replica sets and sharded clusters) and gives a position to resume from when one opens, a
//! watch is one change stream filtered on the server to the owner's changes: no command while
//! nothing happens. Elsewhere (a standalone MongoDB, servers without change streams, and servers
//! whose change streams give no resume position before their first event, so the driver's own
//! resume after a dropped connection would skip what happened meanwhile) it polls: one `find` per poll, every
//! [`WatchOptions::poll_interval`] while nothing is found. [`Mode::ChangeStreams`] insists on a
//! change stream wherever the server opens one; on a server whose change streams stamp events
//! before storing them, that can miss an item stored concurrently with another (see
//! docs/SERVERS.md).
//!
//! A poll reads the items whose time is at most [`WatchOptions::lookback`] older than the newest
//! one it has reported, and reports those it has not: an item stamped before another but stored
//! after it (two senders racing, a write retried after a failure) is still reported, once. The
//! token remembers the items reported within that window, so a poll never repeats one, even when
//! items arrive while it runs. An item stored more than the lookback after its stamp (a write
//! retried past it) would be missed: keep the lookback above the stores' retry budget (both are
//! 10 s and 60 s by default). A watch without a token reports what comes after it was asked
//! for (`watch` was called), even if it is first polled later: the items stamped from that
//! millisecond on, so an item stored in the same millisecond just before the call is reported
//! too (the boundary errs towards reporting, never towards missing). Notification groups are
//! stamped with the server's clock, the rest with the application's: where the two differ,
//! start from a time of the server's with [`WatchOptions::since`].
//!
//! # Tokens, backpressure, failures
//!
//! Every [`Update`] carries a [`ResumeToken`]: watching again from it continues with the next
//! item, whatever mode either watch used (a watch started from a polling token on a server with
//! change streams first catches up with one poll). A token names the store, view and owner it
//! was made for; another watch refuses it ([`Invalid::Cursor`](crate::error::Invalid::Cursor)).
//!
//! The stream does work only while it is polled: nothing is read ahead of the consumer, and
//! dropping it ends its server work (a change stream's cursor is closed). A transient failure
//! (a dropped connection, a failover) is retried under the store's [`crate::retry::RetryPolicy`],
//! reopening a change stream from the last event; past the policy's budget the stream yields
//! the error and ends.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bson::Document;
use futures::{Stream, StreamExt};
use mongodb::change_stream::event::{ChangeStreamEvent, ResumeToken as ServerToken};
use mongodb::change_stream::ChangeStream;
use mongodb::options::FullDocumentType;
use mongodb::Collection;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::page::{invalid, Cursor, Scope};
use crate::retry::Backoff;
use crate::setters::builder_setters;

/// The tag of resume tokens in the crate's cursor format.
const TOKEN_TAG: &str = "w";

/// How a watch learns of new items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Change streams where the server has them, polling elsewhere.
    #[default]
    Auto,
    /// Change streams; a server without them fails the watch with [`Error::Unsupported`].
    ChangeStreams,
    /// One `find` per poll, whatever the server.
    Polling,
}

/// How a watch runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchOptions {
    /// Change streams or polling (default [`Mode::Auto`]).
    pub mode: Mode,
    /// How long a poll that found nothing waits before the next (default 500 ms).
    pub poll_interval: Duration,
    /// How much older than the newest item reported a late item may be and still be reported
    /// by a poll (default 60 s); see the [module docs](self).
    pub lookback: Duration,
    /// Items read per poll at most (default 100).
    pub batch: usize,
    /// Where a watch without a token starts: items stamped from this time on (default: when
    /// `watch` is called).
    pub since: Option<bson::DateTime>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            mode: Mode::Auto,
            poll_interval: Duration::from_millis(500),
            lookback: Duration::from_secs(60),
            batch: 100,
            since: None,
        }
    }
}

impl WatchOptions {
    builder_setters! {
        /// The same options in `mode`.
        mode: Mode,

        /// The same options polling every `interval` when a poll finds nothing.
        poll_interval: Duration,

        /// The same options with `lookback`.
        lookback: Duration,
    }

    /// The same options starting, without a token, from `time` rather than now.
    pub fn since(mut self, time: bson::DateTime) -> Self {
        self.since = Some(time);
        self
    }
}

/// Where a watch continues: after the update that carried it. Text (`Display`), and parsed
/// back with `str::parse`; opaque (the crate's [`Cursor`] format).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResumeToken(Cursor);

impl fmt::Display for ResumeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for ResumeToken {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let cursor: Cursor = s.parse()?;
        if !cursor.has_tag(PAIR_TAG) && !cursor.has_tag(TOKEN_TAG) {
            return Err(invalid(
                "made by another store than a watch: not a resume token",
            ));
        }
        Ok(Self(cursor))
    }
}

/// A new item, and the token to resume after it.
#[derive(Clone, Debug, PartialEq)]
pub struct Update<T> {
    /// The new item.
    pub item: T,
    /// Watching again from this continues after `item`.
    pub token: ResumeToken,
}

/// A stream of updates; dropping it stops the watch.
pub type Updates<T> = Pin<Box<dyn Stream<Item = Result<Update<T>>> + Send>>;

/// An item's place among its source's items: a time (milliseconds; a position where the source
/// numbers its items) and an id breaking ties. Later items have greater keys, up to the
/// source's lookback.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) time: i64,
    pub(crate) id: String,
}

impl Key {
    pub(crate) fn new(time: i64, id: impl Into<String>) -> Self {
        Self {
            time,
            id: id.into(),
        }
    }
}

/// What a store watches: how to poll its items, and which change events carry them.
#[async_trait]
pub(crate) trait Source: Send + Sync + 'static {
    /// An item of the source.
    type Item: Send + 'static;

    /// The source in tokens: the store, the view and the owner, so a token of another watch is
    /// refused.
    fn name(&self) -> String;

    /// Whether item keys are assigned in the order items are stored (positions), so a poll
    /// needs no lookback.
    fn ordered(&self) -> bool {
        false
    }

    /// The store's backend: its retry policy, and the server's capabilities.
    fn backend(&self) -> &Backend;

    /// Where a watch without a token asked for at `since` starts, read from the server when it
    /// first runs, for sources whose keys are not times (positions); `None`: from
    /// [`Source::start`].
    async fn initial(&self, _since: bson::DateTime) -> Result<Option<Key>> {
        Ok(None)
    }

    /// Where a watch without a token starts, asked for at `now`: items with a greater key are
    /// reported. Sources whose keys are coarser than milliseconds start earlier.
    fn start(&self, now: bson::DateTime) -> Key {
        Key::new(now.timestamp_millis(), "")
    }

    /// One `find` (and, for items kept elsewhere, one more for those not `seen`): the items the
    /// request asks for, in key order.
    async fn poll(&self, request: PollRequest<'_>) -> Result<Vec<(Key, Self::Item)>>;

    /// The collection and the pipeline stages that keep the source's change events.
    async fn changes(&self) -> Result<(Collection<Document>, Vec<Document>)>;

    /// The items a change event brings. Where the event's document holds items already
    /// reported (a bucket, a feed), those after `newest` and not `seen`.
    async fn items_of(&self, change: Change<'_>) -> Result<Vec<(Key, Self::Item)>>;
}

/// What one [`Source::items_of`] is given: a change `event`, the `newest` key reported so far,
/// and the keys reported lately (`seen`).
pub(crate) struct Change<'a> {
    pub(crate) event: ChangeStreamEvent<Document>,
    pub(crate) newest: &'a Key,
    pub(crate) seen: &'a BTreeSet<Key>,
}

/// What one [`Source::poll`] asks for: the items whose key is at least `from`, at most
/// `limit`. Items whose key is in `seen` were reported already; a source may leave them out.
pub(crate) struct PollRequest<'a> {
    pub(crate) from: &'a Key,
    pub(crate) seen: &'a BTreeSet<Key>,
    pub(crate) limit: usize,
}

/// The stream of `source`'s new items, from `from` (or from now).
pub(crate) fn watch<S: Source>(
    source: S,
    from: Option<ResumeToken>,
    options: WatchOptions,
) -> Updates<S::Item> {
    let watcher = Watcher::new(Arc::new(source), from, options);
    Box::pin(futures::stream::unfold(watcher, |mut watcher| async move {
        let next = watcher.next().await?;
        Some((next, watcher))
    }))
}

/// A stream that yields `error` and ends: a watch refused before it starts (a blank owner).
pub(crate) fn failed<T: Send + 'static>(error: Error) -> Updates<T> {
    Box::pin(futures::stream::once(async move { Err(error) }))
}

/// A watch's state: what was reported, and how to learn of more.
struct Watcher<S: Source> {
    source: Arc<S>,
    options: WatchOptions,
    /// The token a watch started from, until it is read.
    from: Option<ResumeToken>,
    /// When a watch without a token starts ([`WatchOptions::since`], or when it was asked for).
    since: bson::DateTime,
    started: bool,
    /// Whether the watch uses a change stream.
    streaming: bool,
    stream: Option<ChangeStream<ChangeStreamEvent<Document>>>,
    /// The change stream's position: after the last event whose items were all reported.
    server_token: Option<ServerToken>,
    /// The newest key reported (or where the watch started).
    newest: Key,
    /// Items before it are not reported (older than the watch).
    floor: Option<Key>,
    /// Keys reported within the lookback of the newest.
    recent: BTreeSet<Key>,
    /// Items read and not yet handed out, with the server token to resume from after each.
    buffer: VecDeque<(Key, S::Item, Option<ServerToken>)>,
    ended: bool,
}

impl<S: Source> Watcher<S> {
    fn new(source: Arc<S>, from: Option<ResumeToken>, options: WatchOptions) -> Self {
        // A watch without a token reports what comes after it was asked for.
        let since = options.since.unwrap_or_else(bson::DateTime::now);
        let now = source.start(since);
        Self {
            source,
            options,
            from,
            since,
            started: false,
            streaming: false,
            stream: None,
            server_token: None,
            newest: now.clone(),
            floor: Some(now),
            recent: BTreeSet::new(),
            buffer: VecDeque::new(),
            ended: false,
        }
    }

    async fn next(&mut self) -> Option<Result<Update<S::Item>>> {
        loop {
            if let Some((key, item, server_token)) = self.buffer.pop_front() {
                self.report(key);
                if let Some(token) = server_token {
                    self.server_token = Some(token);
                }
                return Some(Ok(Update {
                    item,
                    token: self.token(),
                }));
            }
            if self.ended {
                return None;
            }
            if let Err(error) = self.fill().await {
                self.ended = true;
                return Some(Err(error));
            }
        }
    }

    /// Reads until the buffer holds something new.
    async fn fill(&mut self) -> Result<()> {
        if !self.started {
            self.start().await?;
        }
        let policy = *self.source.backend().retry_policy();
        let mut backoff = Backoff::new(&policy, "watch");
        while self.buffer.is_empty() {
            let step = if self.streaming {
                self.next_event().await
            } else {
                self.poll().await.map(|found| found > 0)
            };
            match step {
                Ok(true) => {}
                Ok(false) if !self.streaming => {
                    tokio::time::sleep(self.options.poll_interval).await;
                }
                Ok(false) => {}
                Err(error) if error.is_transient() => {
                    self.stream = None;
                    backoff.wait(error).await?;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Reads the starting token (or starts from now), and picks polling or a change stream.
    async fn start(&mut self) -> Result<()> {
        let catch_up = match self.from.take() {
            Some(token) => {
                self.resume_from(&token)?;
                self.server_token.is_none()
            }
            None => {
                if let Some(initial) = self.source.initial(self.since).await? {
                    self.newest = initial.clone();
                    self.floor = Some(initial);
                }
                true
            }
        };
        self.streaming = match self.options.mode {
            Mode::Polling => false,
            Mode::Auto => self.source.backend().dialect().await?.streams_changes(),
            Mode::ChangeStreams => {
                if !self.source.backend().dialect().await?.streams_changes() {
                    return Err(Error::Unsupported {
                        limit: crate::error::Limit::Server,
                        feature: "watching through change streams",
                        reason:
                            "the server has no change streams (a standalone MongoDB, for one): \
                                 use `Mode::Auto` or `Mode::Polling`"
                                .to_owned(),
                    });
                }
                true
            }
        };
        self.started = true;
        if self.streaming {
            self.open().await?;
            if self.server_token.is_none() && self.options.mode == Mode::Auto {
                // The server gave no position to resume from (some do not until a first event): the driver's own resume after a dropped connection would start
                // from "now" and miss what happened meanwhile. Polling misses nothing.
                self.stream = None;
                self.streaming = false;
            }
        }
        if self.streaming && catch_up {
            // From a polling token, or from when the watch was asked for: the stream opens
            // first, then polls catch up with what was stored before; what both see is reported
            // once.
            while self.poll().await? > 0 {}
        }
        Ok(())
    }

    /// One poll: the items from the lookback window, those not reported yet into the buffer.
    /// Returns how many were new.
    async fn poll(&mut self) -> Result<usize> {
        let lookback = if self.source.ordered() {
            0
        } else {
            self.options.lookback.as_millis().min(i64::MAX as u128) as i64
        };
        // Past what the buffer holds already (a catch-up reads more than one poll's worth).
        let top = match self.buffer.back() {
            Some((key, ..)) if key > &self.newest => key,
            _ => &self.newest,
        };
        let from = Key::new(top.time.saturating_sub(lookback), "");
        let limit = self.options.batch.max(1) + self.recent.len() + self.buffer.len();
        let items = self
            .source
            .poll(PollRequest {
                from: &from,
                seen: &self.recent,
                limit,
            })
            .await?;
        let mut new = 0;
        for (key, item) in items {
            if self.is_new(&key) && !self.buffer.iter().any(|(k, ..)| k == &key) {
                self.buffer.push_back((key, item, None));
                new += 1;
            }
        }
        Ok(new)
    }

    fn is_new(&self, key: &Key) -> bool {
        !self.recent.contains(key)
            && self.floor.as_ref().is_none_or(|floor| key > floor)
            && (!self.source.ordered() || key > &self.newest)
    }

    /// Opens the change stream after the last event reported (or from now).
    async fn open(&mut self) -> Result<()> {
        let (collection, pipeline) = self.source.changes().await?;
        let stream = collection
            .watch()
            .pipeline(pipeline)
            .full_document(FullDocumentType::UpdateLookup)
            .resume_after(self.server_token.clone())
            .await?;
        if self.server_token.is_none() {
            self.server_token = stream.resume_token();
        }
        self.stream = Some(stream);
        Ok(())
    }

    /// The next change event's new items into the buffer; whether there were any.
    async fn next_event(&mut self) -> Result<bool> {
        if self.stream.is_none() {
            self.open().await?;
        }
        let Some(stream) = self.stream.as_mut() else {
            return Ok(false);
        };
        let event = match stream.next().await {
            Some(event) => event?,
            None => {
                self.stream = None;
                return Ok(false);
            }
        };
        let event_token = event.id.clone();
        let items = self
            .source
            .items_of(Change {
                event,
                newest: &self.newest,
                seen: &self.recent,
            })
            .await?;
        let fresh: Vec<(Key, S::Item)> = items
            .into_iter()
            .filter(|(key, _)| self.is_new(key))
            .collect();
        if fresh.is_empty() {
            // Nothing to report, but the stream moved on.
            self.server_token = Some(event_token);
            return Ok(false);
        }
        let last = fresh.len() - 1;
        for (i, (key, item)) in fresh.into_iter().enumerate() {
            // Only the event's last item resumes after the event: resuming after an earlier one
            // reads the event again, and its items after that one.
            let token = (i == last).then(|| event_token.clone());
            self.buffer.push_back((key, item, token));
        }
        Ok(true)
    }

    /// Records `key` as reported.
    fn report(&mut self, key: Key) {
        if key > self.newest {
            self.newest = key.clone();
        }
        self.recent.insert(key);
        let lookback = self.options.lookback.as_millis().min(i64::MAX as u128) as i64;
        let oldest = self.newest.time.saturating_sub(lookback);
        let newest = &self.newest;
        let ordered = self.source.ordered();
        self.recent.retain(|key| {
            if ordered {
                key == newest
            } else {
                key.time >= oldest
            }
        });
        if self.floor.as_ref().is_some_and(|floor| floor.time < oldest) {
            self.floor = None;
        }
    }

    /// The token of the watch as it stands.
    fn token(&self) -> ResumeToken {
        let server = self
            .server_token
            .as_ref()
            .and_then(|token| bson::to_vec(token).ok())
            .map(|bytes| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .unwrap_or_default();
        let (floor_time, floor_id) = match &self.floor {
            Some(floor) => (floor.time.to_string(), floor.id.clone()),
            None => (String::new(), String::new()),
        };
        let mut fields = vec![
            server,
            self.newest.time.to_string(),
            self.newest.id.clone(),
            floor_time,
            floor_id,
        ];
        for key in &self.recent {
            fields.push(key.time.to_string());
            fields.push(key.id.clone());
        }
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        ResumeToken(Cursor::new(TOKEN_TAG, self.scope(), &fields))
    }

    /// The scope of the watch's tokens: its source's name (the store, the view and the owner).
    fn scope(&self) -> Scope {
        Scope::new("watch", &[&self.source.name()])
    }

    /// Continues from `token`.
    fn resume_from(&mut self, token: &ResumeToken) -> Result<()> {
        let fields = token.0.all_fields(TOKEN_TAG, self.scope())?;
        let [server, time, id, floor_time, floor_id, rest @ ..] = fields.as_slice() else {
            return Err(invalid("not a watch's token"));
        };
        let number = |text: &str| text.parse::<i64>().map_err(|_| invalid("bad position"));
        self.newest = Key::new(number(time)?, id.clone());
        self.floor = if floor_time.is_empty() {
            None
        } else {
            Some(Key::new(number(floor_time)?, floor_id.clone()))
        };
        self.server_token = if server.is_empty() {
            None
        } else {
            let bytes = (0..server.len())
                .step_by(2)
                .map(|i| {
                    server
                        .get(i..i + 2)
                        .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                })
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| invalid("bad change stream token"))?;
            Some(bson::from_slice(&bytes).map_err(|_| invalid("bad change stream token"))?)
        };
        if rest.len() % 2 != 0 {
            return Err(invalid("not a watch's token"));
        }
        self.recent = rest
            .chunks(2)
            .map(|pair| Ok(Key::new(number(&pair[0])?, pair[1].clone())))
            .collect::<Result<_>>()?;
        Ok(())
    }
}

/// The tag of a paired watch's tokens.
const PAIR_TAG: &str = "wpair";

/// One stream of two watches' updates (a timeline: an inbox and the posts merged into it), each
/// item from either as it comes. A token holds both watches' tokens and the time the pair
/// started, so a part that had reported nothing when the token was made resumes from that time;
/// it is bound to `name` (the store, the view and the owner), so another pair refuses it.
pub(crate) fn pair<T: Send + 'static>(
    name: &str,
    first: impl FnOnce(Option<ResumeToken>, WatchOptions) -> Updates<T>,
    second: impl FnOnce(Option<ResumeToken>, WatchOptions) -> Updates<T>,
    from: Option<ResumeToken>,
    options: WatchOptions,
) -> Updates<T> {
    let scope = Scope::new("watch", &[name]);
    let parts = match from.map(|token| split(&token, scope)).transpose() {
        Ok(parts) => parts,
        Err(error) => return failed(error),
    };
    let (first_from, second_from, start) = parts.unwrap_or_else(|| {
        let start = options.since.unwrap_or_else(bson::DateTime::now);
        (None, None, start)
    });
    let options = options.since(start);
    let tagged = |stream: Updates<T>, side: bool| stream.map(move |update| (side, update));
    let streams = futures::stream::select(
        tagged(first(first_from.clone(), options.clone()), false),
        tagged(second(second_from.clone(), options), true),
    );
    let last = (first_from, second_from);
    Box::pin(streams.scan(last, move |last, (side, update)| {
        let update = update.map(|Update { item, token }| {
            if side {
                last.1 = Some(token);
            } else {
                last.0 = Some(token);
            }
            let text = |token: &Option<ResumeToken>| token.as_ref().map(ToString::to_string);
            let (a, b) = (
                text(&last.0).unwrap_or_default(),
                text(&last.1).unwrap_or_default(),
            );
            let start = start.timestamp_millis().to_string();
            Update {
                item,
                token: ResumeToken(Cursor::new(PAIR_TAG, scope, &[&a, &b, &start])),
            }
        });
        futures::future::ready(Some(update))
    }))
}

/// The two tokens and the start time in a paired watch's token of `scope`.
fn split(
    token: &ResumeToken,
    scope: Scope,
) -> Result<(Option<ResumeToken>, Option<ResumeToken>, bson::DateTime)> {
    let fields = token.0.all_fields(PAIR_TAG, scope)?;
    let [a, b, start] = fields.as_slice() else {
        return Err(invalid("not a paired watch's token"));
    };
    let part = |text: &str| -> Result<Option<ResumeToken>> {
        if text.is_empty() {
            Ok(None)
        } else {
            text.parse().map(Some)
        }
    };
    let start = start.parse::<i64>().map_err(|_| invalid("bad start"))?;
    Ok((part(a)?, part(b)?, bson::DateTime::from_millis(start)))
}
