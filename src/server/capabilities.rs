//! What a server can do ([`Capabilities`]): each family's values are in its file of
//! [`super::family`], known for MongoDB and FerretDB 1.x, probed for the rest.

/// What the server can do, so code (and tests) can pick a path or say why they skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// A single-document update (`$inc`, `$push`, `findAndModify`) is atomic under concurrency.
    /// FerretDB 1.x reads, modifies and writes back without isolation: concurrent updates of one
    /// document lose writes (measured: 8 threads x 200 `$inc` left 164 of 1,600). Not probed
    /// (a race is no cheap probe): true everywhere but FerretDB 1.x.
    pub atomic_updates: bool,
    /// Statements sent in one `update` command: the server's `maxWriteBatchSize`, and at most
    /// 3 on FerretDB 1.x, which holds a connection of its pool for each statement until the
    /// command ends and stops answering when its pool runs out (50 statements hung it).
    pub max_update_statements: usize,
    /// How many `update` commands of one batch of statements are sent at once: 1 where one
    /// command of many statements is cheapest (MongoDB, where each statement is its own
    /// atomic write), 4 on DocumentDB (FerretDB 2.x), where a command is one transaction and
    /// commands are kept small.
    pub update_commands_in_flight: usize,
    /// A write command runs as one transaction that holds every row it locks until the
    /// command ends (DocumentDB, FerretDB 2.x: PostgreSQL row locks). There a write of many
    /// documents that other writers also touch (every recipient's state on shared messages)
    /// goes document by document in `_id` order, in small commands, so writers wait briefly
    /// and never deadlock; on MongoDB each document's write is atomic on its own, and one
    /// `update_many` is cheapest.
    pub write_commands_are_transactions: bool,
    /// An unordered multi-statement `update` command runs every statement and reports each
    /// failure by its index. FerretDB 1.x stops at the first failure and misreports its index.
    pub unordered_update_batches: bool,
    /// `$slice` in a `find` projection, both `-N` and `[skip, limit]`.
    pub slice_projection: bool,
    /// `$slice: [skip, limit]` with `skip` past the end of the array returns an empty array, as
    /// on MongoDB (mongo-java-server fails the query instead).
    pub slice_past_end: bool,
    /// A projection (`fields`) in `findAndModify`; FerretDB 1.x returns whole documents only.
    pub find_and_modify_projection: bool,
    /// The `$first` accumulator in `$group`.
    pub group_first_accumulator: bool,
    /// Multi-document transactions (MongoDB replica sets and sharded clusters).
    pub transactions: bool,
    /// `text` indexes and `$text` queries.
    pub text_search: bool,
    /// A `$text` search of several quoted phrases matches only documents holding every one, as
    /// on MongoDB. DocumentDB (FerretDB 2.x, Azure Cosmos DB for MongoDB vCore) matches
    /// documents holding any of them; there a search that needs every term filters the text
    /// index's candidates again ([`crate::feed::Search`]). False where there is no `$text`.
    pub text_all_phrases: bool,
    /// Partial indexes (`partialFilterExpression`): an index holding only the documents that
    /// match a filter, which writes of other documents do not maintain (the unread copies of an
    /// inbox, say). Probed elsewhere; FerretDB 1.x has none.
    pub partial_indexes: bool,
    /// Change streams (`$changeStream`): MongoDB replica sets and sharded clusters, and servers
    /// whose probe opens one (mongo-java-server with its oplog); not a standalone MongoDB, not
    /// FerretDB. Where they are missing, watches poll ([`crate::realtime`]).
    pub change_streams: bool,
    /// `$graphLookup` and the equality form of `$lookup` in `aggregate`, as
    /// [`FollowGraph::recommendations`](crate::graph::FollowGraph::recommendations) uses them
    /// (a join on another collection by a computed field, `$unwind` keeping empty arrays). On
    /// MongoDB through `mongos` before 5.1 they cannot read a sharded collection, so they count
    /// as missing there; so they do on every other server's sharded deployment (DocumentDB
    /// refuses `$graphLookup` from a sharded collection, and a probe would have to shard one).
    /// FerretDB 1.x has neither stage.
    pub graph_lookup: bool,
    /// An `update` whose `u` is an aggregation pipeline (MongoDB 4.2 and later), so an update
    /// can compute a value from the document it changes in its own atomic step: a bucketed push
    /// stamps its entry no earlier than the bucket's newest instead of being refused and sent
    /// again (docs/BENCHMARKS.md, "Sustained load"). Probed elsewhere; FerretDB 1.x and
    /// mongo-java-server have none.
    pub pipeline_updates: bool,
    /// Connected through `mongos`, so collections can be sharded.
    pub sharding: bool,
    /// Filters on fields other than `_id` are evaluated by the storage engine (through an index
    /// on MongoDB). FerretDB 1.x on SQLite hands the engine only a filter that is exactly
    /// `{_id: <string or ObjectId>}`, and even that is a scan inside SQLite; for any other filter
    /// (`{_id, owner}` included) it decodes every document of the collection and tests each one:
    /// measured on 20,000 documents of 300 bytes, an update by `{_id}` takes about 0.1 s, by
    /// `{_id, owner}` or `{owner, sequence}` 0.7 to 1 s (`examples/ferretdb_pushdown.rs`).
    /// Stores address their hot documents by `_id` alone where this is false.
    pub filters_beyond_id: bool,
    /// A write the driver sends again after a lost reply is applied once. The driver retries
    /// a write by itself only on a replica set or through a `mongos` (retryable writes), where
    /// MongoDB recognises the repeat by its session's transaction number; where it does not
    /// retry (a standalone server) this holds too. DocumentDB's gateway over Citus applied such
    /// a repeated `insert` a second time (measured: `per_comment::survives_outage`, the fault
    /// proxy dropping replies, stored a comment twice in about half the runs; never with
    /// `retryWrites=false`; a repeated `$push` of a hybrid page stored a comment twice too), so
    /// it is false there and for any other server that answers as a `mongos` or replica set
    /// member. Connect to such a server with `retryWrites=false` in the URI (Azure's connection
    /// strings for Cosmos DB vCore carry it): the library's own retries are written to apply
    /// once. As a second guard, its inserts that must land once read back by `_id` after a
    /// duplicate key there, to tell their own first attempt from another writer's document.
    pub retried_writes_applied_once: bool,
    /// A `find` that filters an index's leading field by several values (`$in`) and sorts by
    /// the index's next fields reads each value's index range in order and merges them
    /// (MongoDB's `SORT_MERGE`), so the newest page of many authors reads about a page per
    /// author. DocumentDB 0.106 sorts every document the values match (measured: 1,120 ms for
    /// 50 of 1,000,000 by 50 senders, docs/BENCHMARKS.md), as mongo-java-server and FerretDB
    /// 1.x sort what they scan; there the stores read each value's newest page apart and merge
    /// them. Not probed (a plan is no cheap probe): true on MongoDB only.
    pub merged_key_ranges: bool,
    /// A sort is served from an index only in the index's own key order (never by reading it
    /// backwards), and only when the planner expects that to be cheaper, which it does not
    /// right after a bulk load, before the table has statistics. DocumentDB: its ordered scans
    /// come from the `documentdb_extended_rum` access method with `enableIndexOrderbyPushdown`
    /// (the default from DocumentDB 0.109; docs/SERVERS.md), and without them it sorts every
    /// match. There a page read newest first reads an index whose time keys descend, named in
    /// a hint. False where an index is read either way (MongoDB) and where sorts happen in
    /// memory anyway (FerretDB 1.x, mongo-java-server). Not probed: true for DocumentDB.
    pub ordered_scans_forward_only: bool,
}

impl Capabilities {
    /// The names of the capabilities this server lacks, for messages. How the server plans a
    /// sorted read ([`Capabilities::merged_key_ranges`],
    /// [`Capabilities::ordered_scans_forward_only`]) is not listed: the stores adapt their
    /// reads to it, and nothing is missing.
    pub fn missing(&self) -> Vec<&'static str> {
        [
            (self.atomic_updates, "atomic updates"),
            (
                self.unordered_update_batches,
                "per-statement errors in unordered updates",
            ),
            (self.slice_projection, "$slice projections"),
            (
                self.slice_past_end || !self.slice_projection,
                "$slice past the end",
            ),
            (self.find_and_modify_projection, "findAndModify projections"),
            (self.group_first_accumulator, "$first in $group"),
            (self.transactions, "transactions"),
            (self.text_search, "$text search"),
            (
                self.text_all_phrases || !self.text_search,
                "$text requiring every phrase",
            ),
            (self.partial_indexes, "partial indexes"),
            (self.change_streams, "change streams"),
            (self.pipeline_updates, "update pipelines"),
            (self.filters_beyond_id, "filters beyond `_id` in the engine"),
            (self.graph_lookup, "$graphLookup"),
            (
                self.retried_writes_applied_once,
                "retried writes applied once",
            ),
        ]
        .into_iter()
        .filter_map(|(has, name)| (!has).then_some(name))
        .collect()
    }
}
