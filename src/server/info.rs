//! The connected server's identity ([`ServerInfo`]), from its `buildInfo` and `hello` replies.

use bson::{doc, Document};
use mongodb::{Client, Database};

use super::capabilities::Capabilities;
use super::probes::Probes;
use super::reply::bson_to_usize;
use crate::error::Result;
use crate::retry::{retry, RetryPolicy};

/// The database [`ServerInfo::detect`] probes in, when it is given a client and no database.
const PROBE_DATABASE: &str = "mongo_social_probe";

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
    /// DocumentDB's own gateway (`pg_documentdb_gw`) in front of the DocumentDB engine on
    /// PostgreSQL, alone or sharded over Citus: the open-source DocumentDB and, by the same
    /// design, Azure Cosmos DB for MongoDB vCore. Its `buildInfo` has no `gitVersion` and no
    /// FerretDB fields, and its `hello` has an `internal` field no MongoDB reply has. The engine
    /// is the one under FerretDB 2.x, so the same tunings apply; what its operators do is probed.
    DocumentDb,
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
    /// it. About ten commands, once per store. A probe that the server refuses (for example, for
    /// lack of privileges) counts as the capability missing.
    ///
    /// Detection changes nothing of the application's (the probes write only to their scratch
    /// collection, a new one on each attempt), so it is retried as a whole on transient
    /// failures (a lost connection, as DocumentDB's gateway gives some new connections, or a
    /// deadlock) under the default [`RetryPolicy`]: a probe that could not tell is never taken
    /// for a missing capability.
    ///
    /// # Errors
    ///
    /// The server unreachable, or failing past the retry budget.
    pub async fn detect_for(database: &Database) -> Result<Self> {
        retry(&RetryPolicy::default(), "detect the server", || async {
            let admin = database.client().database("admin");
            let build = admin.run_command(doc! { "buildInfo": 1 }).await?;
            let (hello, has_hello) = hello(database.client()).await?;
            let probes = if is_probed(&flavor_of(&build, &hello)) {
                Some(Probes::run(database).await?)
            } else {
                None
            };
            Ok(Self::from_replies(
                &build,
                &hello,
                has_hello,
                probes.as_ref(),
            ))
        })
        .await
    }

    /// The server described by its replies to `buildInfo` and `hello` (or `isMaster`), and by
    /// what the probes found where they ran.
    pub(super) fn from_replies(
        build: &Document,
        hello: &Document,
        has_hello: bool,
        probes: Option<&Probes>,
    ) -> Self {
        let flavor = flavor_of(build, hello);
        let topology = topology_of(hello);
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
            ServerFlavor::DocumentDb => {
                format!("DocumentDB's gateway (MongoDB {} wire)", self.version)
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
pub(super) fn is_probed(flavor: &ServerFlavor) -> bool {
    match flavor {
        ServerFlavor::MongoDb => false,
        ServerFlavor::FerretDb { version } => !version.starts_with("v1."),
        ServerFlavor::DocumentDb | ServerFlavor::Other => true,
    }
}

/// MongoDB, FerretDB 1.x or 2.x, DocumentDB's gateway or another server, from the replies to
/// `buildInfo` and `hello` (or `isMaster`).
pub(super) fn flavor_of(build: &Document, hello: &Document) -> ServerFlavor {
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
        // The gateway's `hello` carries its topology document under `internal`.
        None if hello.contains_key("internal") => ServerFlavor::DocumentDb,
        None => ServerFlavor::Other,
    }
}

/// The server's reply to `hello`, or to `isMaster` where it has no `hello` (with `false`).
async fn hello(client: &Client) -> Result<(Document, bool)> {
    let admin = client.database("admin");
    match admin.run_command(doc! { "hello": 1 }).await {
        Ok(hello) => Ok((hello, true)),
        Err(error) if is_command_error(&error) => {
            Ok((admin.run_command(doc! { "isMaster": 1 }).await?, false))
        }
        Err(error) => Err(error.into()),
    }
}

/// How the deployment is laid out, from a `hello` (or `isMaster`) reply.
fn topology_of(hello: &Document) -> Topology {
    if hello.get_str("msg") == Ok("isdbgrid") {
        Topology::Sharded
    } else if hello.contains_key("setName") {
        Topology::ReplicaSet
    } else {
        Topology::Standalone
    }
}

impl Topology {
    /// The topology of the deployment `client` reaches: one `hello` (or `isMaster`), without
    /// the rest of [`ServerInfo::detect`].
    pub async fn detect(client: &Client) -> Result<Self> {
        Ok(topology_of(&hello(client).await?.0))
    }
}

/// Whether the server answered, refusing the command (rather than the connection failing).
fn is_command_error(error: &mongodb::error::Error) -> bool {
    matches!(*error.kind, mongodb::error::ErrorKind::Command(_))
}
