//! What the connected server is and what it can do, detected once per store.
//!
//! Detection asks the server who it is (`buildInfo`, then `hello`, or `isMaster` where `hello` is
//! missing) and, for a server that is neither MongoDB nor FerretDB, tries what it can do on a
//! scratch collection (see [`ServerInfo::detect_for`]). Every difference between servers that the
//! library cares about ends up in one [`Capabilities`] value.

use bson::{doc, Bson, Document};
use mongodb::{Client, Database};

use crate::error::Result;

/// Collections whose names start with this are the scratch collections of capability probes,
/// created and dropped by [`ServerInfo::detect_for`]. Command counters leave them out.
pub const PROBE_COLLECTION_PREFIX: &str = "mongo_social_probe_";

/// The database [`ServerInfo::detect`] probes in, when it is given a client and no database.
const PROBE_DATABASE: &str = "mongo_social_probe";

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
const FERRETDB_1_MAX_UPDATE_STATEMENTS: usize = 3;

/// MongoDB's `maxWriteBatchSize` since 3.6, used when a server does not report one.
const DEFAULT_MAX_WRITE_BATCH_SIZE: usize = 100_000;

/// Which implementation of the MongoDB wire protocol answered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerFlavor {
    /// MongoDB itself (Community, Enterprise or Atlas): `buildInfo` has a `gitVersion` and no
    /// FerretDB fields.
    MongoDb,
    /// FerretDB, with the FerretDB version it reported (`ferretdbVersion` in 1.x,
    /// `ferretdb.version` in 2.x).
    FerretDb {
        /// FerretDB's own version, such as `v1.24.2` or `v2.5.0`.
        version: String,
    },
    /// Another server speaking the MongoDB wire protocol (mongo-java-server, for one): its
    /// `buildInfo` has no `gitVersion`. What it can do is probed, not assumed.
    Other,
}

/// How the deployment is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topology {
    /// One server.
    Standalone,
    /// A replica set member.
    ReplicaSet,
    /// A `mongos` router in front of a sharded cluster.
    Sharded,
}

/// The connected server's identity and capabilities, from its `buildInfo` and `hello` replies
/// (and, for a server that is neither MongoDB nor FerretDB, from probes).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerInfo {
    /// MongoDB, FerretDB or another server.
    pub flavor: ServerFlavor,
    /// The MongoDB version the server reports (FerretDB reports the version it emulates).
    pub version: String,
    /// Standalone, replica set or sharded.
    pub topology: Topology,
    /// Largest BSON document the server stores (`maxBsonObjectSize`).
    pub max_document_bytes: usize,
    /// Most statements the server takes in one write command (`maxWriteBatchSize`).
    pub max_write_batch_size: usize,
    /// Whether the server answered `hello`; servers before MongoDB 4.4.2 (and mongo-java-server)
    /// answer only `isMaster`.
    pub has_hello: bool,
    capabilities: Capabilities,
}

impl ServerInfo {
    /// Asks the server who it is: `buildInfo`, then `hello` (or `isMaster` if the server has no
    /// `hello`). A server that is neither MongoDB nor FerretDB is probed in a scratch collection
    /// of the `mongo_social_probe` database; use [`ServerInfo::detect_for`] to probe in the
    /// application's own database instead.
    pub async fn detect(client: &Client) -> Result<Self> {
        Self::detect_for(&client.database(PROBE_DATABASE)).await
    }

    /// Like [`ServerInfo::detect`], for the client behind a database handle.
    ///
    /// Only when the server is neither MongoDB nor FerretDB 1.x (FerretDB 2.x and
    /// [`ServerFlavor::Other`]) does this write: it creates a scratch collection named
    /// `mongo_social_probe_<random>` in `database`, tries the operations whose support varies
    /// between servers (`$slice` projection forms, a projection in `findAndModify`,
    /// per-statement errors in an unordered `update`, `$first` in `$group`, `$graphLookup`, a
    /// `text` index and whether `$text` requires every quoted phrase, change streams), and drops
    /// it. About ten commands, once per store. A probe that
    /// fails (for example, for lack of privileges) counts as the capability missing.
    pub async fn detect_for(database: &Database) -> Result<Self> {
        let admin = database.client().database("admin");
        let build = admin.run_command(doc! { "buildInfo": 1 }).await?;
        let (hello, has_hello) = match admin.run_command(doc! { "hello": 1 }).await {
            Ok(hello) => (hello, true),
            Err(error) if is_command_error(&error) => {
                (admin.run_command(doc! { "isMaster": 1 }).await?, false)
            }
            Err(error) => return Err(error.into()),
        };
        let probes = if is_probed(&flavor_of(&build)) {
            Some(Probes::run(database).await)
        } else {
            None
        };
        Ok(Self::from_replies(
            &build,
            &hello,
            has_hello,
            probes.as_ref(),
        ))
    }

    /// The server described by its replies to `buildInfo` and `hello` (or `isMaster`), and by
    /// what the probes found where they ran.
    fn from_replies(
        build: &Document,
        hello: &Document,
        has_hello: bool,
        probes: Option<&Probes>,
    ) -> Self {
        let flavor = flavor_of(build);
        let topology = if hello.get_str("msg") == Ok("isdbgrid") {
            Topology::Sharded
        } else if hello.contains_key("setName") {
            Topology::ReplicaSet
        } else {
            Topology::Standalone
        };
        let max_document_bytes = hello
            .get("maxBsonObjectSize")
            .and_then(bson_to_usize)
            .unwrap_or(16 * 1024 * 1024);
        let max_write_batch_size = hello
            .get("maxWriteBatchSize")
            .and_then(bson_to_usize)
            .filter(|size| *size > 0)
            .unwrap_or(DEFAULT_MAX_WRITE_BATCH_SIZE);
        let version = build.get_str("version").unwrap_or("unknown").to_owned();
        let capabilities =
            Capabilities::for_server(&flavor, &version, topology, max_write_batch_size, probes);
        Self {
            flavor,
            version,
            topology,
            max_document_bytes,
            max_write_batch_size,
            has_hello,
            capabilities,
        }
    }

    /// Whether this is FerretDB (any version) rather than MongoDB.
    pub fn is_ferretdb(&self) -> bool {
        matches!(self.flavor, ServerFlavor::FerretDb { .. })
    }

    /// What the server can do.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// A one-line description of what was detected, such as `FerretDB v1.24.2 (MongoDB 7.0.42
    /// wire), standalone; lacks: atomic updates, ...`.
    pub fn describe(&self) -> String {
        let topology = match self.topology {
            Topology::Standalone => "standalone",
            Topology::ReplicaSet => "replica set",
            Topology::Sharded => "sharded (mongos)",
        };
        let server = match &self.flavor {
            ServerFlavor::MongoDb => format!("MongoDB {}", self.version),
            ServerFlavor::FerretDb { version } => {
                format!("FerretDB {version} (MongoDB {} wire)", self.version)
            }
            ServerFlavor::Other => format!(
                "a MongoDB-wire server reporting {} (not MongoDB: no gitVersion in buildInfo)",
                self.version
            ),
        };
        let hello = if self.has_hello { "" } else { ", no `hello`" };
        let lacks = self.capabilities.missing();
        let lacks = if lacks.is_empty() {
            String::new()
        } else {
            format!("; lacks: {}", lacks.join(", "))
        };
        format!(
            "{server}, {topology}{hello}, {} statements per write{lacks}",
            self.capabilities.max_update_statements
        )
    }
}

/// Whether what a server can do is probed rather than known: every engine but MongoDB itself and
/// FerretDB 1.x (whose gaps are fixed: it is end of life). FerretDB 2.x gains operators from
/// release to release and differs from MongoDB in their semantics (its `$text` matches any quoted
/// phrase, where MongoDB requires all), so it is probed like any other engine.
fn is_probed(flavor: &ServerFlavor) -> bool {
    match flavor {
        ServerFlavor::MongoDb => false,
        ServerFlavor::FerretDb { version } => !version.starts_with("v1."),
        ServerFlavor::Other => true,
    }
}

/// MongoDB, FerretDB 1.x or 2.x, or another server, from a `buildInfo` reply.
fn flavor_of(build: &Document) -> ServerFlavor {
    let ferretdb = build.get_str("ferretdbVersion").ok().or_else(|| {
        build
            .get_document("ferretdb")
            .ok()
            .and_then(|ferretdb| ferretdb.get_str("version").ok())
    });
    match ferretdb {
        Some(version) => ServerFlavor::FerretDb {
            version: version.to_owned(),
        },
        None if build.contains_key("gitVersion") => ServerFlavor::MongoDb,
        None => ServerFlavor::Other,
    }
}

/// Whether the server answered, refusing the command (rather than the connection failing).
fn is_command_error(error: &mongodb::error::Error) -> bool {
    matches!(*error.kind, mongodb::error::ErrorKind::Command(_))
}

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
    /// as missing there. FerretDB 1.x has neither stage.
    pub graph_lookup: bool,
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
}

impl Capabilities {
    /// The capabilities of a server of this flavor and topology: known for MongoDB and FerretDB,
    /// taken from `probes` for any other server (everything missing if it was not probed).
    fn for_server(
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
            graph_lookup: joins_on_shards,
            sharding,
            filters_beyond_id: true,
        };
        match flavor {
            ServerFlavor::MongoDb => mongodb,
            ServerFlavor::FerretDb { version } if version.starts_with("v1.") => Self {
                atomic_updates: false,
                max_update_statements: max_write_batch_size.min(FERRETDB_1_MAX_UPDATE_STATEMENTS),
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
                graph_lookup: false,
                sharding,
                filters_beyond_id: false,
            },
            // Probed: FerretDB 2.x (DocumentDB on PostgreSQL: atomic updates through row locks)
            // and any other wire server.
            ServerFlavor::FerretDb { .. } | ServerFlavor::Other => {
                let probes = probes.copied().unwrap_or_default();
                Self {
                    atomic_updates: true,
                    max_update_statements: max_write_batch_size,
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
                    graph_lookup: probes.graph_lookup && joins_on_shards,
                    sharding,
                    // Not probed (a cost is no cheap probe): the wire servers we know of use
                    // their indexes.
                    filters_beyond_id: true,
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
            (self.filters_beyond_id, "filters beyond `_id` in the engine"),
            (self.graph_lookup, "$graphLookup"),
        ]
        .into_iter()
        .filter_map(|(has, name)| (!has).then_some(name))
        .collect()
    }
}

/// What the probes of [`ServerInfo::detect_for`] found the server can do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Probes {
    slice_projection: bool,
    slice_past_end: bool,
    find_and_modify_projection: bool,
    unordered_update_batches: bool,
    group_first_accumulator: bool,
    text_search: bool,
    text_all_phrases: bool,
    partial_indexes: bool,
    change_streams: bool,
    graph_lookup: bool,
}

impl Probes {
    /// Tries each operation on a scratch collection of `database`, then drops it. Never fails:
    /// what cannot be tried counts as missing.
    async fn run(database: &Database) -> Self {
        let name = format!("{PROBE_COLLECTION_PREFIX}{}", random_suffix());
        let collection = database.collection::<Document>(&name);
        let seeded = collection
            .insert_one(doc! { "_id": 1, "a": [1, 2, 3], "s": "x", "n": 0, "t": "hello world" })
            .await
            .is_ok();
        let probes = if seeded {
            let (text_search, text_all_phrases) = probe_text_search(database, &name).await;
            Self {
                slice_projection: probe_slice_projection(database, &name).await,
                slice_past_end: probe_slice(database, &name, Bson::from(vec![5, 1]), &[]).await,
                find_and_modify_projection: probe_find_and_modify_projection(database, &name).await,
                unordered_update_batches: probe_unordered_update(database, &name).await,
                group_first_accumulator: probe_group_first(database, &name).await,
                graph_lookup: probe_graph_lookup(database, &name).await,
                text_search,
                text_all_phrases,
                partial_indexes: probe_partial_index(database, &name).await,
                change_streams: probe_change_streams(database, &name).await,
            }
        } else {
            Self::default()
        };
        let _ = collection.drop().await;
        probes
    }
}

/// `$slice: -2` and `$slice: [1, 1]` on `[1, 2, 3]`.
async fn probe_slice_projection(database: &Database, collection: &str) -> bool {
    probe_slice(database, collection, Bson::Int32(-2), &[2, 3]).await
        && probe_slice(database, collection, Bson::from(vec![1, 1]), &[2]).await
}

/// Whether `{a: {$slice: slice}}` projects `[1, 2, 3]` to `expected`.
async fn probe_slice(database: &Database, collection: &str, slice: Bson, expected: &[i32]) -> bool {
    let reply = database
        .run_command(doc! {
            "find": collection,
            "filter": { "_id": 1 },
            "projection": { "a": { "$slice": slice } },
        })
        .await;
    let Some(found) = reply
        .ok()
        .and_then(|reply| first_batch(&reply).into_iter().next())
    else {
        return false;
    };
    let expected: Vec<Bson> = expected.iter().map(|n| Bson::Int32(*n)).collect();
    found
        .get_array("a")
        .is_ok_and(|a| a.iter().map(as_i64).eq(expected.iter().map(as_i64)))
}

/// Whether `findAndModify` with `fields` returns only the projected fields.
async fn probe_find_and_modify_projection(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "findAndModify": collection,
            "query": { "_id": 1 },
            "update": { "$inc": { "n": 1 } },
            "fields": { "n": 1 },
            "new": true,
        })
        .await;
    reply
        .ok()
        .and_then(|reply| reply.get_document("value").ok().cloned())
        .is_some_and(|value| value.contains_key("n") && !value.contains_key("a"))
}

/// Whether an unordered `update` whose first statement fails still runs the second and reports
/// the failure at index 0.
async fn probe_unordered_update(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "update": collection,
            "updates": [
                { "q": { "_id": 1 }, "u": { "$inc": { "s": 1 } } },
                { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } },
            ],
            "ordered": false,
        })
        .await;
    let Ok(reply) = reply else {
        return false;
    };
    let ran_second = reply.get("nModified").and_then(bson_to_usize) == Some(1);
    let first_failed = reply.get_array("writeErrors").is_ok_and(|errors| {
        errors.len() == 1
            && matches!(&errors[0], Bson::Document(error)
                if error.get("index").and_then(bson_to_usize) == Some(0))
    });
    ran_second && first_failed
}

/// Whether `$group` with `$first` works.
async fn probe_group_first(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "aggregate": collection,
            "pipeline": [{ "$group": { "_id": Bson::Null, "first": { "$first": "$_id" } } }],
            "cursor": {},
        })
        .await;
    reply
        .ok()
        .and_then(|reply| first_batch(&reply).into_iter().next())
        .is_some_and(|group| group.get("first").map(as_i64) == Some(Some(1)))
}

/// Whether the recommendation read's joins work as on MongoDB: `$lookup` by `_id`, a field
/// computed from the joined array (`$max`), `$graphLookup` from a computed start (one that
/// finds the seeded document, one that is an empty array and finds nothing), and `$unwind`
/// keeping documents whose array is empty. On the seeded `{_id: 1, s: .., n: ..}`, joined with
/// itself, the pipeline yields one document whose `x` is 1 and that has no `y`.
async fn probe_graph_lookup(database: &Database, collection: &str) -> bool {
    let start = |condition: Document| doc! { "$cond": [condition, 1, Bson::Array(Vec::new())] };
    let look_up = |into: &str| {
        doc! { "$graphLookup": {
            "from": collection, "startWith": "$s", "connectFromField": "s",
            "connectToField": "_id", "as": into, "maxDepth": 0,
        } }
    };
    let reply = database
        .run_command(doc! {
            "aggregate": collection,
            "pipeline": [
                { "$match": { "_id": 1 } },
                { "$lookup": {
                    "from": collection, "localField": "_id", "foreignField": "_id", "as": "j",
                } },
                { "$project": { "n": { "$max": "$j.n" } } },
                { "$project": { "n": 1, "s": start(doc! { "$lte": ["$n", 1_000_000] }) } },
                look_up("g"),
                { "$project": { "g": 1, "s": start(doc! { "$gt": ["$n", 1_000_000] }) } },
                look_up("h"),
                { "$unwind": { "path": "$h", "preserveNullAndEmptyArrays": true } },
                { "$unwind": { "path": "$g", "preserveNullAndEmptyArrays": true } },
                { "$project": { "x": "$g._id", "y": "$h._id" } },
            ],
            "cursor": {},
        })
        .await;
    let Ok(reply) = reply else {
        return false;
    };
    let batch = first_batch(&reply);
    batch.len() == 1 && batch[0].get("x").and_then(as_i64) == Some(1) && !batch[0].contains_key("y")
}

/// Whether `version` (`"5.0.14"`) is `major.minor` or later.
fn version_at_least(version: &str, major: u64, minor: u64) -> bool {
    let mut parts = version
        .split('.')
        .map(|part| part.parse::<u64>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// Whether a `text` index can be built and `$text` finds through it; and whether a search of two
/// quoted phrases, one of them absent from the seeded `"hello world"`, finds nothing (every
/// phrase required, as on MongoDB) rather than the document (any phrase, as on DocumentDB).
async fn probe_text_search(database: &Database, collection: &str) -> (bool, bool) {
    let indexed = database
        .run_command(doc! {
            "createIndexes": collection,
            "indexes": [{ "key": { "t": "text" }, "name": "t_text" }],
        })
        .await
        .is_ok();
    if !indexed {
        return (false, false);
    }
    let found = |search: &'static str| async move {
        database
            .run_command(doc! {
                "find": collection,
                "filter": { "$text": { "$search": search } },
            })
            .await
            .ok()
            .map(|reply| first_batch(&reply).len())
    };
    if found("hello").await != Some(1) {
        return (false, false);
    }
    (true, found("\"hello\" \"absent\"").await == Some(0))
}

/// Whether an index with a `partialFilterExpression` can be built.
async fn probe_partial_index(database: &Database, collection: &str) -> bool {
    database
        .run_command(doc! {
            "createIndexes": collection,
            "indexes": [{
                "key": { "s": 1 }, "name": "s_partial",
                "partialFilterExpression": { "n": { "$gte": 0 } },
            }],
        })
        .await
        .is_ok()
}

/// Whether a change stream opens on the collection (its cursor is closed again at once).
async fn probe_change_streams(database: &Database, collection: &str) -> bool {
    let reply = database
        .run_command(doc! {
            "aggregate": collection,
            "pipeline": [{ "$changeStream": {} }],
            "cursor": {},
        })
        .await;
    let Ok(reply) = reply else {
        return false;
    };
    if let Ok(id) = reply.get_document("cursor").and_then(|c| c.get_i64("id")) {
        let _ = database
            .run_command(doc! { "killCursors": collection, "cursors": [id] })
            .await;
    }
    reply.get_document("cursor").is_ok()
}

/// The documents of a cursor reply's first batch.
fn first_batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .and_then(|cursor| cursor.get_array("firstBatch"))
        .map(|batch| {
            batch
                .iter()
                .filter_map(|item| item.as_document().cloned())
                .collect()
        })
        .unwrap_or_default()
}

fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(v) => Some(i64::from(*v)),
        Bson::Int64(v) => Some(*v),
        Bson::Double(v) if v.fract() == 0.0 => Some(*v as i64),
        _ => None,
    }
}

/// A suffix unlikely to clash between concurrent probes: process id, time and a counter.
fn random_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    format!(
        "{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn bson_to_usize(value: &Bson) -> Option<usize> {
    match value {
        Bson::Int32(v) => usize::try_from(*v).ok(),
        Bson::Int64(v) => usize::try_from(*v).ok(),
        Bson::Double(v) if *v >= 0.0 => Some(*v as usize),
        _ => None,
    }
}

/// The capabilities of a store's server, detected on first use and then remembered. Clones
/// share what was detected.
#[derive(Clone, Debug, Default)]
pub(crate) struct DetectedCapabilities(std::sync::Arc<tokio::sync::OnceCell<Capabilities>>);

impl DetectedCapabilities {
    /// Capabilities known already (given by the application): nothing is detected.
    pub(crate) fn given(capabilities: Capabilities) -> Self {
        Self(std::sync::Arc::new(tokio::sync::OnceCell::new_with(Some(
            capabilities,
        ))))
    }

    /// The capabilities of the server behind `database`, asking it only the first time (callers
    /// racing on the first use wait for one detection).
    pub(crate) async fn get(&self, database: &Database) -> Result<Capabilities> {
        self.0
            .get_or_try_init(|| async {
                Ok(ServerInfo::detect_for(database).await?.capabilities())
            })
            .await
            .copied()
    }
}

#[cfg(test)]
mod tests {
    //! Detection from replies recorded from each server, so servers this machine cannot run
    //! (MongoDB 4.4 to 8, replica sets, `mongos`, FerretDB 2.x) are covered too.

    use super::*;

    fn info(
        build: Document,
        hello: Document,
        has_hello: bool,
        probes: Option<Probes>,
    ) -> ServerInfo {
        ServerInfo::from_replies(&build, &hello, has_hello, probes.as_ref())
    }

    fn mongodb_build(version: &str, git: &str) -> Document {
        let parts: Vec<i32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
        doc! {
            "version": version, "gitVersion": git, "modules": [], "allocator": "tcmalloc",
            "javascriptEngine": "mozjs", "sysInfo": "deprecated",
            "versionArray": [parts[0], parts[1], parts[2], 0], "bits": 64, "debug": false,
            "maxBsonObjectSize": 16_777_216, "storageEngines": ["devnull", "wiredTiger"], "ok": 1.0,
        }
    }

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert!(version_at_least("5.1.0", 5, 1) && version_at_least("8.0.4", 5, 1));
        assert!(version_at_least("10.0.0", 5, 1), "numerically, not as text");
        assert!(!version_at_least("5.0.30", 5, 1) && !version_at_least("4.4.29", 5, 1));
        assert!(!version_at_least("unknown", 5, 1));
    }

    #[test]
    fn mongodb_4_4_0_without_hello() {
        let build = mongodb_build("4.4.0", "563487e100c4215e2dce98d0af2a6a5a2d67c5cf");
        let is_master = doc! {
            "ismaster": true, "maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000, "localTime": bson::DateTime::now(),
            "logicalSessionTimeoutMinutes": 30, "connectionId": 3, "minWireVersion": 0,
            "maxWireVersion": 9, "readOnly": false, "ok": 1.0,
        };
        let server = info(build, is_master, false, None);
        assert_eq!(server.flavor, ServerFlavor::MongoDb);
        assert_eq!(server.version, "4.4.0");
        assert_eq!(server.topology, Topology::Standalone);
        assert!(!server.has_hello);
        let capabilities = server.capabilities();
        assert!(capabilities.atomic_updates && capabilities.text_search);
        assert!(capabilities.slice_projection && capabilities.slice_past_end);
        assert!(!capabilities.transactions, "standalone");
        assert_eq!(capabilities.max_update_statements, 100_000);
        assert!(
            capabilities.missing() == ["transactions", "change streams"],
            "{:?}",
            capabilities.missing()
        );
        assert_eq!(
            server.describe(),
            "MongoDB 4.4.0, standalone, no `hello`, 100000 statements per write; lacks: \
             transactions, change streams"
        );
    }

    #[test]
    fn mongodb_7_standalone() {
        let build = mongodb_build("7.0.14", "ce59cfc6a3c5e5c067dca0d30697edd68d4f5188");
        let hello = doc! {
            "isWritablePrimary": true,
            "topologyVersion": { "processId": bson::oid::ObjectId::new(), "counter": 0_i64 },
            "maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000, "localTime": bson::DateTime::now(),
            "logicalSessionTimeoutMinutes": 30, "connectionId": 12, "minWireVersion": 0,
            "maxWireVersion": 21, "readOnly": false, "ok": 1.0,
        };
        let server = info(build, hello, true, None);
        assert_eq!(server.flavor, ServerFlavor::MongoDb);
        assert_eq!(server.topology, Topology::Standalone);
        assert_eq!(server.max_write_batch_size, 100_000);
        assert!(server.has_hello);
        assert_eq!(
            server.capabilities().missing(),
            ["transactions", "change streams"]
        );
    }

    #[test]
    fn mongodb_8_replica_set_and_mongos() {
        let build = mongodb_build("8.0.4", "bc35ab4305d9920d9d0491c1c9ef9b72383d31f9");
        let member = doc! {
            "topologyVersion": { "processId": bson::oid::ObjectId::new(), "counter": 6_i64 },
            "hosts": ["db0:27017", "db1:27017", "db2:27017"], "setName": "rs0", "setVersion": 1,
            "isWritablePrimary": true, "secondary": false, "primary": "db0:27017",
            "me": "db0:27017", "electionId": bson::oid::ObjectId::new(),
            "maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000, "localTime": bson::DateTime::now(),
            "logicalSessionTimeoutMinutes": 30, "connectionId": 40, "minWireVersion": 0,
            "maxWireVersion": 25, "readOnly": false, "ok": 1.0,
        };
        let server = info(build.clone(), member, true, None);
        assert_eq!(server.topology, Topology::ReplicaSet);
        assert!(server.capabilities().transactions);
        assert!(server.capabilities().change_streams);
        assert!(!server.capabilities().sharding);
        assert!(server.capabilities().missing().is_empty());

        let mongos = doc! {
            "isWritablePrimary": true, "msg": "isdbgrid", "maxBsonObjectSize": 16_777_216,
            "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
            "localTime": bson::DateTime::now(), "logicalSessionTimeoutMinutes": 30,
            "connectionId": 7, "maxWireVersion": 25, "minWireVersion": 0, "ok": 1.0,
        };
        let server = info(build, mongos.clone(), true, None);
        assert_eq!(server.topology, Topology::Sharded);
        assert!(server.capabilities().sharding && server.capabilities().transactions);
        assert!(server.capabilities().graph_lookup);

        // Before 5.1, `mongos` runs no `$graphLookup` or `$lookup` from a sharded collection.
        for (version, git, joins) in [
            ("4.4.29", "f4dda329a99811c707eb06d05ad023599f9be263", false),
            ("5.0.30", "a79f6ab5d2d0c2a0f0e1e9d1de6bcbd6d5d5e3c2", false),
            ("5.1.0", "0ff6f6b2a5e4e9b2c9cbd04a56ad88cf6a2f5c51", true),
            ("10.0.0", "0000000000000000000000000000000000000000", true),
        ] {
            let server = info(mongodb_build(version, git), mongos.clone(), true, None);
            assert_eq!(
                server.capabilities().graph_lookup,
                joins,
                "mongos {version}"
            );
            assert_eq!(
                server.capabilities().missing().contains(&"$graphLookup"),
                !joins
            );
        }
        let member = info(
            mongodb_build("4.4.29", "f4dda329a99811c707eb06d05ad023599f9be263"),
            doc! { "isWritablePrimary": true, "setName": "rs0", "ok": 1.0 },
            true,
            None,
        );
        assert!(
            member.capabilities().graph_lookup,
            "unsharded: every version"
        );
    }

    #[test]
    fn ferretdb_1_24() {
        // Recorded from FerretDB v1.24.2 (SQLite) as the fixture starts it.
        let build = doc! {
            "version": "7.0.42", "gitVersion": "unknown", "modules": [], "sysInfo": "deprecated",
            "versionArray": [7, 0, 42, 0], "bits": 64, "debug": false,
            "maxBsonObjectSize": 16_777_216,
            "buildEnvironment": { "CGO_ENABLED": "0", "GOARCH": "amd64", "GOOS": "linux" },
            "ferretdbVersion": "v1.24.2",
            "ferretdbFeatures": { "aggregationStages": ["$project", "$group", "$match"] },
            "ok": 1.0,
        };
        let hello = doc! {
            "isWritablePrimary": true, "maxBsonObjectSize": 16_777_216,
            "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
            "localTime": bson::DateTime::now(), "logicalSessionTimeoutMinutes": 30,
            "connectionId": 42, "minWireVersion": 0, "maxWireVersion": 21, "readOnly": false,
            "ok": 1.0,
        };
        let server = info(build, hello, true, None);
        assert_eq!(
            server.flavor,
            ServerFlavor::FerretDb {
                version: "v1.24.2".to_owned()
            }
        );
        assert!(server.is_ferretdb());
        let capabilities = server.capabilities();
        assert!(!capabilities.atomic_updates);
        assert!(!capabilities.unordered_update_batches);
        assert!(!capabilities.slice_projection && !capabilities.text_search);
        assert!(!capabilities.change_streams);
        assert!(!capabilities.filters_beyond_id);
        assert!(!capabilities.graph_lookup, "no $graphLookup, no $lookup");
        assert_eq!(
            capabilities.max_update_statements, FERRETDB_1_MAX_UPDATE_STATEMENTS,
            "capped well below its pool"
        );
        assert!(server
            .describe()
            .starts_with("FerretDB v1.24.2 (MongoDB 7.0.42 wire), standalone, 3 statements"));
    }

    #[test]
    fn ferretdb_2_is_not_taken_for_mongodb() {
        // FerretDB 2.x (DocumentDB on PostgreSQL) reports its version under `ferretdb`.
        let build = doc! {
            "version": "7.0.77", "gitVersion": "dcd4d6cc2b2c4a7ab4ea16e4f0ba2fa1bd7ab9b2",
            "modules": [], "sysInfo": "deprecated", "versionArray": [7, 0, 77, 0], "bits": 64,
            "debug": false, "maxBsonObjectSize": 16_777_216,
            "ferretdb": {
                "version": "v2.5.0", "gitVersion": "b4bd2a6", "package": "deb",
                "postgresql": "PostgreSQL 17.5", "documentdb": "0.106.0",
            },
            "ok": 1.0,
        };
        let hello = doc! {
            "isWritablePrimary": true, "maxBsonObjectSize": 16_777_216,
            "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
            "localTime": bson::DateTime::now(), "logicalSessionTimeoutMinutes": 30,
            "minWireVersion": 0, "maxWireVersion": 21, "readOnly": false, "ok": 1.0,
        };
        // What its probes find (FerretDB 2.5.0 over DocumentDB 0.106, the fixture's
        // `documentdb`): everything but change streams, and a `$text` of two quoted phrases
        // matches documents holding either.
        let probes = Probes {
            slice_projection: true,
            slice_past_end: true,
            find_and_modify_projection: true,
            unordered_update_batches: true,
            group_first_accumulator: true,
            text_search: true,
            text_all_phrases: false,
            partial_indexes: true,
            change_streams: false,
            graph_lookup: true,
        };
        assert!(is_probed(&flavor_of(&build)));
        let server = info(build, hello, true, Some(probes));
        assert_eq!(
            server.flavor,
            ServerFlavor::FerretDb {
                version: "v2.5.0".to_owned()
            }
        );
        let capabilities = server.capabilities();
        assert!(capabilities.atomic_updates && capabilities.unordered_update_batches);
        assert!(capabilities.slice_projection && capabilities.text_search);
        assert!(!capabilities.text_all_phrases, "any phrase, not every one");
        assert!(capabilities.filters_beyond_id);
        assert_eq!(
            capabilities.missing(),
            [
                "transactions",
                "$text requiring every phrase",
                "change streams"
            ]
        );
        assert!(!capabilities.transactions && !capabilities.change_streams);
        assert!(
            capabilities.graph_lookup,
            "DocumentDB has $graphLookup and $lookup"
        );
        assert!(!capabilities.transactions);
        assert_eq!(capabilities.max_update_statements, 100_000);
    }

    #[test]
    fn mongo_java_server_is_probed() {
        // Recorded from mongo-java-server 1.47.0 as the fixture launches it (reporting 5.0 on
        // wire version 13): no `gitVersion`, no `hello`, batches of 1,000.
        let build = doc! {
            "version": "5.0.0", "versionArray": [5, 0, 0], "maxBsonObjectSize": 16_777_216,
            "ok": 1.0,
        };
        let is_master = doc! {
            "ismaster": true, "maxBsonObjectSize": 16_777_216, "maxWriteBatchSize": 1000,
            "maxMessageSizeBytes": 48_000_000, "maxWireVersion": 13, "minWireVersion": 0,
            "localTime": bson::DateTime::now(), "ok": 1.0,
        };
        // What its probes find: `$slice` works but not past the end, `$text` does not.
        let probes = Probes {
            slice_projection: true,
            slice_past_end: false,
            find_and_modify_projection: true,
            unordered_update_batches: true,
            group_first_accumulator: true,
            text_search: false,
            text_all_phrases: false,
            partial_indexes: true,
            change_streams: true,
            graph_lookup: true,
        };
        let server = info(build.clone(), is_master.clone(), false, Some(probes));
        assert_eq!(server.flavor, ServerFlavor::Other);
        assert_eq!(server.max_write_batch_size, 1000);
        let capabilities = server.capabilities();
        assert!(
            capabilities.atomic_updates,
            "assumed where it cannot be probed"
        );
        assert!(capabilities.slice_projection && !capabilities.slice_past_end);
        assert!(!capabilities.text_search && !capabilities.transactions);
        assert!(capabilities.change_streams, "its oplog is on");
        assert!(
            capabilities.graph_lookup,
            "probed: it has $graphLookup and $lookup"
        );
        assert_eq!(capabilities.max_update_statements, 1000);
        assert_eq!(
            server.describe(),
            "a MongoDB-wire server reporting 5.0.0 (not MongoDB: no gitVersion in buildInfo), \
             standalone, no `hello`, 1000 statements per write; lacks: $slice past the end, \
             transactions, $text search"
        );

        // Unprobed (for example, no write privilege): nothing optional is assumed.
        let unprobed = info(build, is_master, false, None).capabilities();
        assert!(!unprobed.slice_projection && !unprobed.text_search);
        assert!(!unprobed.unordered_update_batches && !unprobed.find_and_modify_projection);
        assert!(!unprobed.change_streams);
        assert!(!unprobed.graph_lookup);
    }
}
