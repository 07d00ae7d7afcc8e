//! What the stores ask of the server, as intents: "return these fields of the document a
//! `findAndModify` changed", "the last N elements of this array", "search text for every term",
//! "read through the partial index", "join the graph in one aggregate", "watch for changes". The
//! [`Dialect`] answers each from the server's [`Capabilities`] with a ready projection, filter,
//! pipeline or path, so data-model code never reads a capability flag nor names a server.
//!
//! The capabilities come from the server's family (`src/server/family/`, one file each:
//! MongoDB, FerretDB 1.x, DocumentDB, mongo-java-server) or from the application, which may give
//! them to a store's builder; either way the dialect follows the capabilities, never the
//! family, so given capabilities are honoured as they are. To add a server family:
//!
//! 1. a file in `src/server/family/` that recognises it, states its [`Capabilities`] (or probes
//!    them) and its tunings, and explains them; a variant of `ServerFamily` (its name in traces)
//!    in `src/server/family/mod.rs`;
//! 2. only if it differs in a way no capability describes yet: a field of [`Capabilities`]
//!    (`src/server/capabilities.rs`), its probe (`src/server/probes.rs`), and the intent here
//!    that reads it;
//! 3. a row in `docs/SERVERS.md`.

use bson::{doc, Bson, Document};
use mongodb::action::FindOneAndUpdate;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use crate::server::Capabilities;

/// The server's way of doing what the stores ask, chosen from its capabilities once per store
/// (they are detected once, or given).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dialect(Capabilities);

impl Dialect {
    pub(crate) fn new(capabilities: Capabilities) -> Self {
        Self(capabilities)
    }

    /// `action` (a `findAndModify`) returning only `fields` of its document where the server
    /// takes a projection there; where it does not (FerretDB 1.x), the whole document.
    pub(crate) fn returning<'a, T: Send + Sync>(
        &self,
        action: FindOneAndUpdate<'a, T>,
        fields: Document,
    ) -> FindOneAndUpdate<'a, T> {
        if self.0.find_and_modify_projection {
            action.projection(fields)
        } else {
            action
        }
    }

    /// The projection of an array field that keeps its last `count` elements, or `None` where
    /// the server has no `$slice` projection: then the caller reads the whole array and keeps
    /// them itself.
    pub(crate) fn last_of_array(&self, count: usize) -> Option<Bson> {
        self.0
            .slice_projection
            .then(|| Bson::from(doc! { "$slice": slice_number(count, -1) }))
    }

    /// The projection of an array field that keeps `limit` elements from `skip` on (`skip` may
    /// be past the end: then none), or `None` where the server cannot do that in a projection
    /// (no `$slice`, or a `$slice` that fails past the end): then the caller reads the whole
    /// array and cuts it itself.
    pub(crate) fn array_window(&self, skip: usize, limit: usize) -> Option<Bson> {
        (self.0.slice_projection && self.0.slice_past_end)
            .then(|| Bson::from(doc! { "$slice": [slice_number(skip, 1), slice_number(limit, 1)] }))
    }

    /// The `$match` stages that keep the documents holding every one of `terms` through the
    /// collection's text index: `$text` with each term quoted, and where the server's `$text`
    /// takes any quoted phrase rather than all, a second `$match` on `every_term` (the caller's
    /// pattern filter requiring each term). `None` where the server has no text search: then
    /// the caller searches by pattern alone.
    pub(crate) fn text_search(
        &self,
        terms: &[&str],
        every_term: impl FnOnce() -> Document,
    ) -> Option<Vec<Document>> {
        if !self.0.text_search {
            return None;
        }
        let quoted: Vec<String> = terms
            .iter()
            .map(|term| format!("\"{}\"", term.replace('"', "")))
            .collect();
        let mut stages = vec![doc! { "$match": { "$text": { "$search": quoted.join(" ") } } }];
        if !self.0.text_all_phrases {
            stages.push(doc! { "$match": every_term() });
        }
        Some(stages)
    }

    /// `indexed`, a filter that a partial index serves, where the server has partial indexes
    /// (those the store declared with [`super::Backend::with_partial_index`]); `otherwise` where
    /// it has none.
    pub(crate) fn through_partial_index(&self, indexed: Document, otherwise: Document) -> Document {
        if self.0.partial_indexes {
            indexed
        } else {
            otherwise
        }
    }

    /// Whether a walk of the follow graph runs as one `aggregate` (`$graphLookup` and the
    /// equality `$lookup` on the graph's collections) rather than as `find`s, one per step.
    pub(crate) fn joins_in_aggregate(&self) -> bool {
        self.0.graph_lookup
    }

    /// Whether changes can be watched as they happen (a change stream) rather than polled.
    pub(crate) fn streams_changes(&self) -> bool {
        self.0.change_streams
    }
}

/// `n` with `sign`, as an `Int32` where it fits.
fn slice_number(n: usize, sign: i64) -> Bson {
    let n = i64::try_from(n).unwrap_or(i64::MAX) * sign;
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

/// The index behind one owner's pages, newest first: the owner, then `sent`, ties broken by the
/// message id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimeIndex {
    /// The field holding the owner (an array of owners where `owners_in_array`).
    pub(crate) owner_field: &'static str,
    /// The field holding the id that breaks ties on `sent`.
    pub(crate) id_field: &'static str,
    /// Whether a document holds several owners in an array (the index is multikey).
    pub(crate) owners_in_array: bool,
}

impl TimeIndex {
    /// Ascending keys, read backwards for newest first; their prefix `{owner, sent}` is what a
    /// shard key of that form needs.
    pub(crate) fn ascending(&self) -> Document {
        doc! { self.owner_field: 1, "sent": 1, self.id_field: 1 }
    }

    /// Descending time keys, read forward for newest first.
    pub(crate) fn descending(&self) -> Document {
        doc! { self.owner_field: 1, "sent": -1, self.id_field: -1 }
    }

    /// The ascending keys as an index the server never reads in order: where ordered scans go
    /// forward only, the index a newest-first page of owners in an array falls back on (see
    /// [`NewestFirst::FromNewest`]). The option `storageEngine: { enableOrderedIndex: false }`
    /// keeps it DocumentDB's unordered kind, whose matches are collected and sorted.
    pub(crate) fn unordered(&self) -> IndexModel {
        IndexModel::builder()
            .keys(self.ascending())
            .options(
                IndexOptions::builder()
                    .storage_engine(doc! { "enableOrderedIndex": false })
                    .build(),
            )
            .build()
    }
}

/// How a newest-first page of one owner's [`TimeIndex`] is read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NewestFirst {
    /// Sorted by `(sent, id)`, the cursor a range of both: the server walks the ascending index
    /// backwards (MongoDB) or sorts the owner's matches.
    Sorted,
    /// As [`NewestFirst::Sorted`], through the descending index, whose keys the hint names:
    /// where ordered scans go forward only (DocumentDB), whose planner otherwise picks by table
    /// statistics and may collect and sort every match (306 ms against 6 ms at 100,000).
    Hinted(Document),
    /// Owners in an array where ordered scans go forward only. DocumentDB 0.106 reads an index
    /// over an array in order only where no filter bounds the keys it orders by (an array may
    /// put a document under keys on either side of a bound): a cursor's range on `sent` makes
    /// it collect and sort every match, or fail. So the page reads the descending index
    /// (`ordered`, hinted) in order from the owner's newest entry, with the cursor as a filter
    /// (`$nor` of what it passed): the newest 50 of 1,000,000 in 2 ms by hand, against 2 s
    /// sorted. Page `k` reads the `k - 1` pages before it again (and every hidden message
    /// newer than it). Where the engine gives up that order (some hundreds of thousands of
    /// entries read, see [`Dialect::gave_up_ordered_scan`]), the page is read as
    /// [`NewestFirst::Sorted`] through the unordered index (`unordered`, hinted).
    FromNewest {
        /// The descending index's keys.
        ordered: Document,
        /// The unordered index's keys.
        unordered: Document,
    },
}

impl Dialect {
    /// Whether a read in an index's order must name the index in its hint: where ordered scans
    /// go forward only (DocumentDB), whose planner otherwise picks by table statistics and may
    /// collect and sort every match.
    pub(crate) fn names_ordered_indexes(&self) -> bool {
        self.0.ordered_scans_forward_only
    }

    /// How a newest-first page of `index` is read.
    pub(crate) fn newest_first(&self, index: &TimeIndex) -> NewestFirst {
        match (self.0.ordered_scans_forward_only, index.owners_in_array) {
            (false, _) => NewestFirst::Sorted,
            (true, false) => NewestFirst::Hinted(index.descending()),
            (true, true) => NewestFirst::FromNewest {
                ordered: index.descending(),
                unordered: index.ascending(),
            },
        }
    }

    /// Whether `error` says an ordered index scan gave up its order (see
    /// [`NewestFirst::FromNewest`]): the same read through an unordered index passes.
    pub(crate) fn gave_up_ordered_scan(&self, error: &mongodb::error::Error) -> bool {
        match &*error.kind {
            mongodb::error::ErrorKind::Command(command) => {
                self.0.ordered_scans_forward_only
                    && crate::server::family::errors::gave_up_ordered_scan(
                        command.code,
                        &command.message,
                    )
            }
            _ => false,
        }
    }
}
