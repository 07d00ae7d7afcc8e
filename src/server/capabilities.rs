//! What a server can do ([`Capabilities`]): known for MongoDB and FerretDB 1.x, probed for
//! the rest.

use super::info::{ServerFlavor, Topology};
use super::probes::Probes;

/// The statements sent to FerretDB 1.x in one `update` command.
///
/// FerretDB 1.x keeps each statement's query open, and with it one connection of its pool to
/// SQLite or PostgreSQL, until the whole command ends; each statement's write takes one more.
/// When the open queries of the commands in flight fill the pool, every one of them waits for a
/// connection that none will give back, and the server answers nothing more until it restarts.
/// Its pools hold 100 connections on SQLite and 50 by default on PostgreSQL. Measured on
/// FerretDB 1.24.2, with 50 statements per command: on PostgreSQL a second bucketed send to the
/// same 100 recipients hung; on SQLite 4 concurrent senders, each sending twice to its own 50
/// recipients, hung. With the driver's default pool of 10 connections, 3 statements per command
/// keep one client's worst case at 10 × 3 open queries plus 10 writes, 40 of PostgreSQL's 50.
/// Round trips are a small part of a statement's cost there: each makes the engine scan the
/// collection.
pub(super) const FERRETDB_1_MAX_UPDATE_STATEMENTS: usize = 3;

/// The statements sent to DocumentDB (FerretDB 2.x) in one `update` command, and how many such
/// commands of one batch are in flight at once.
///
/// DocumentDB runs a whole `update` command as one PostgreSQL transaction, so every row a
/// statement locks stays locked until the last statement of the command: two sends whose
/// recipients overlap queue behind each other's whole command, and under many concurrent
/// senders the queues make the slowest sends wait for many others. Measured on DocumentDB 0.106
/// (16 concurrent senders, sends to 1-100 of 200 users, docs/BENCHMARKS.md "Sustained load"):
/// with every push of a send in one command, p50 109 ms and p99 1,400 ms; with commands of 10
/// statements, p50 177 ms and p99 602 ms, and 10% more sends per second. Alone, a send to 1,000
/// took 176 ms in one command and 120-135 ms in commands of 10 to 25 statements, 4 at a time
/// (they run on several PostgreSQL backends at once). Commands of one batch lock disjoint rows,
/// each in the batch's key order, so they cannot deadlock with each other or another batch.
pub(super) const DOCUMENTDB_MAX_UPDATE_STATEMENTS: usize = 16;
/// See [`DOCUMENTDB_MAX_UPDATE_STATEMENTS`].
pub(super) const DOCUMENTDB_UPDATE_COMMANDS_IN_FLIGHT: usize = 4;

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
}

impl Capabilities {
    /// The capabilities of a server of this flavor and topology: known for MongoDB and FerretDB,
    /// taken from `probes` for any other server (everything missing if it was not probed).
    pub(super) fn for_server(
        flavor: &ServerFlavor,
        version: &str,
        topology: Topology,
        max_write_batch_size: usize,
        probes: Option<&Probes>,
    ) -> Self {
        let sharding = topology == Topology::Sharded;
        // `$graphLookup` and `$lookup` read a sharded collection from MongoDB 5.1 on.
        let joins_on_shards = !sharding || version_at_least(version, 5, 1);
        // MongoDB's, for MongoDB and the engines that took its semantics.
        let mongodb = Self {
            atomic_updates: true,
            max_update_statements: max_write_batch_size,
            update_commands_in_flight: 1,
            write_commands_are_transactions: false,
            unordered_update_batches: true,
            slice_projection: true,
            slice_past_end: true,
            find_and_modify_projection: true,
            group_first_accumulator: true,
            transactions: topology != Topology::Standalone,
            text_search: true,
            text_all_phrases: true,
            partial_indexes: true,
            change_streams: topology != Topology::Standalone,
            pipeline_updates: true,
            graph_lookup: joins_on_shards,
            sharding,
            filters_beyond_id: true,
            retried_writes_applied_once: true,
        };
        match flavor {
            ServerFlavor::MongoDb => mongodb,
            ServerFlavor::FerretDb { version } if version.starts_with("v1.") => Self {
                atomic_updates: false,
                max_update_statements: max_write_batch_size.min(FERRETDB_1_MAX_UPDATE_STATEMENTS),
                update_commands_in_flight: 1,
                write_commands_are_transactions: false,
                unordered_update_batches: false,
                slice_projection: false,
                slice_past_end: false,
                find_and_modify_projection: false,
                group_first_accumulator: false,
                transactions: false,
                text_search: false,
                text_all_phrases: false,
                partial_indexes: false,
                change_streams: false,
                pipeline_updates: false,
                graph_lookup: false,
                sharding,
                filters_beyond_id: false,
                retried_writes_applied_once: true,
            },
            // Probed: FerretDB 2.x and DocumentDB's gateway (the DocumentDB engine on
            // PostgreSQL: atomic updates through row locks), and any other wire server.
            ServerFlavor::FerretDb { .. } | ServerFlavor::DocumentDb | ServerFlavor::Other => {
                let probes = probes.copied().unwrap_or_default();
                // FerretDB 2.x and the gateway are DocumentDB: a command is one transaction.
                let documentdb = matches!(
                    flavor,
                    ServerFlavor::FerretDb { .. } | ServerFlavor::DocumentDb
                );
                Self {
                    atomic_updates: true,
                    max_update_statements: if documentdb {
                        max_write_batch_size.min(DOCUMENTDB_MAX_UPDATE_STATEMENTS)
                    } else {
                        max_write_batch_size
                    },
                    update_commands_in_flight: if documentdb {
                        DOCUMENTDB_UPDATE_COMMANDS_IN_FLIGHT
                    } else {
                        1
                    },
                    write_commands_are_transactions: documentdb,
                    unordered_update_batches: probes.unordered_update_batches,
                    slice_projection: probes.slice_projection,
                    slice_past_end: probes.slice_projection && probes.slice_past_end,
                    find_and_modify_projection: probes.find_and_modify_projection,
                    group_first_accumulator: probes.group_first_accumulator,
                    transactions: false,
                    text_search: probes.text_search,
                    text_all_phrases: probes.text_search && probes.text_all_phrases,
                    partial_indexes: probes.partial_indexes,
                    change_streams: probes.change_streams,
                    pipeline_updates: probes.pipeline_updates,
                    // The probe reads an unsharded collection; on a sharded deployment the
                    // graph's are sharded, and DocumentDB refuses `$graphLookup` from them.
                    graph_lookup: probes.graph_lookup && !sharding,
                    sharding,
                    // Not probed (a cost is no cheap probe): the wire servers we know of use
                    // their indexes.
                    filters_beyond_id: true,
                    // Not probed (a lost reply is no cheap probe): only where the driver does
                    // not retry writes by itself.
                    retried_writes_applied_once: topology == Topology::Standalone,
                }
            }
        }
    }

    /// The names of the capabilities this server lacks, for messages.
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

/// Whether `version` (`"5.0.14"`) is `major.minor` or later.
pub(super) fn version_at_least(version: &str, major: u64, minor: u64) -> bool {
    let mut parts = version
        .split('.')
        .map(|part| part.parse::<u64>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}
