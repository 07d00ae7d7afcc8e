//! What the connected server is and what it can do, detected once per store.

use bson::{doc, Document};
use mongodb::{Client, Database};

use crate::Result;

/// Which implementation of the MongoDB wire protocol answered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerFlavor {
    /// MongoDB itself (Community, Enterprise or Atlas).
    MongoDb,
    /// FerretDB, with the FerretDB version it reported.
    FerretDb {
        /// FerretDB's own version, such as `v1.24.2`.
        version: String,
    },
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

/// The connected server's identity and capabilities, as reported by `buildInfo` and `hello`.
#[derive(Clone, Debug)]
pub struct ServerInfo {
    /// MongoDB or FerretDB.
    pub flavor: ServerFlavor,
    /// The MongoDB version the server reports (FerretDB reports the version it emulates).
    pub version: String,
    /// Standalone, replica set or sharded.
    pub topology: Topology,
    /// Largest BSON document the server stores (`maxBsonObjectSize`).
    pub max_document_bytes: usize,
}

impl ServerInfo {
    /// Asks the server who it is: one `buildInfo` and one `hello` command.
    pub async fn detect(client: &Client) -> Result<Self> {
        let admin = client.database("admin");
        let build = admin.run_command(doc! { "buildInfo": 1 }).await?;
        let hello = admin.run_command(doc! { "hello": 1 }).await?;
        Ok(Self::from_replies(&build, &hello))
    }

    /// Like [`ServerInfo::detect`], for the client behind a database handle.
    pub async fn detect_for(database: &Database) -> Result<Self> {
        Self::detect(database.client()).await
    }

    fn from_replies(build: &Document, hello: &Document) -> Self {
        let flavor = match build.get_str("ferretdbVersion") {
            Ok(version) => ServerFlavor::FerretDb {
                version: version.to_owned(),
            },
            Err(_) => ServerFlavor::MongoDb,
        };
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
        Self {
            flavor,
            version: build.get_str("version").unwrap_or("unknown").to_owned(),
            topology,
            max_document_bytes,
        }
    }

    /// Whether this is FerretDB rather than MongoDB.
    pub fn is_ferretdb(&self) -> bool {
        matches!(self.flavor, ServerFlavor::FerretDb { .. })
    }

    /// The server's capabilities, derived from its flavor and version.
    pub fn capabilities(&self) -> Capabilities {
        let mongo = !self.is_ferretdb();
        Capabilities {
            atomic_updates: mongo,
            max_update_statements: if mongo { 10_000 } else { 50 },
            unordered_update_batches: mongo,
            slice_projection: mongo,
            find_and_modify_projection: mongo,
            group_first_accumulator: mongo,
            transactions: mongo && self.topology != Topology::Standalone,
            text_search: mongo,
            sharding: self.topology == Topology::Sharded,
        }
    }

    /// A one-line description, such as `FerretDB v1.24.2 (MongoDB 7.0.42 wire), standalone`.
    pub fn describe(&self) -> String {
        let topology = match self.topology {
            Topology::Standalone => "standalone",
            Topology::ReplicaSet => "replica set",
            Topology::Sharded => "sharded (mongos)",
        };
        match &self.flavor {
            ServerFlavor::MongoDb => format!("MongoDB {}, {topology}", self.version),
            ServerFlavor::FerretDb { version } => {
                format!(
                    "FerretDB {version} (MongoDB {} wire), {topology}",
                    self.version
                )
            }
        }
    }
}

/// What the server can do, so code (and tests) can pick a path or say why they skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// A single-document update (`$inc`, `$push`, `findAndModify`) is atomic under concurrency.
    /// FerretDB 1.x reads, modifies and writes back without isolation: concurrent updates of one
    /// document lose writes (measured: 8 threads x 200 `$inc` left 164 of 1,600).
    pub atomic_updates: bool,
    /// Statements sent in one `update` command. FerretDB 1.24 holds a database connection for
    /// each matched statement until the command ends and hangs at about 100.
    pub max_update_statements: usize,
    /// An unordered multi-statement `update` command runs every statement and reports each
    /// failure by its index. FerretDB 1.x stops at the first failure and misreports its index.
    pub unordered_update_batches: bool,
    /// `$slice` in a `find` projection.
    pub slice_projection: bool,
    /// A projection (`fields`) in `findAndModify`; FerretDB 1.x returns whole documents only.
    pub find_and_modify_projection: bool,
    /// The `$first` accumulator in `$group`.
    pub group_first_accumulator: bool,
    /// Multi-document transactions (replica sets and sharded clusters).
    pub transactions: bool,
    /// `text` indexes and `$text` queries.
    pub text_search: bool,
    /// Connected through `mongos`, so collections can be sharded.
    pub sharding: bool,
}

fn bson_to_usize(value: &bson::Bson) -> Option<usize> {
    match value {
        bson::Bson::Int32(v) => usize::try_from(*v).ok(),
        bson::Bson::Int64(v) => usize::try_from(*v).ok(),
        bson::Bson::Double(v) if *v >= 0.0 => Some(*v as usize),
        _ => None,
    }
}

/// The capabilities of a store's server, detected on first use and then remembered. Clones
/// share what was detected.
#[derive(Clone, Debug, Default)]
pub(crate) struct DetectedCapabilities(std::sync::Arc<std::sync::OnceLock<Capabilities>>);

impl DetectedCapabilities {
    /// The capabilities of the server behind `database`, asking it only the first time.
    pub(crate) async fn get(&self, database: &Database) -> Result<Capabilities> {
        if let Some(capabilities) = self.0.get() {
            return Ok(*capabilities);
        }
        let capabilities = ServerInfo::detect_for(database).await?.capabilities();
        Ok(*self.0.get_or_init(|| capabilities))
    }
}
