//! The connected server's identity ([`ServerInfo`]), from its `buildInfo` and `hello` replies.

use bson::{doc, Document};
use mongodb::{Client, Database};

use super::capabilities::Capabilities;
use super::family::ServerFamily;
use super::flavor::{flavor_of, topology_of, ServerFlavor, Topology};
use super::probes::Probes;
use super::reply::bson_to_usize;
use crate::error::Result;
use crate::retry::{retry, RetryPolicy};

/// The database [`ServerInfo::detect`] probes in, when it is given a client and no database.
const PROBE_DATABASE: &str = "mongo_social_probe";

/// MongoDB's `maxWriteBatchSize` since 3.6, used when a server does not report one.
const DEFAULT_MAX_WRITE_BATCH_SIZE: usize = 100_000;

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
            let family = ServerFamily::of(&flavor_of(&build, &hello), has_hello);
            let probes = if family.is_probed() {
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
        let capabilities = ServerFamily::of(&flavor, has_hello).capabilities(
            &version,
            topology,
            max_write_batch_size,
            probes,
        );
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

    /// The family of the server: the file of [`super::family`] that knows it. Named in traces.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn family(&self) -> ServerFamily {
        ServerFamily::of(&self.flavor, self.has_hello)
    }

    /// The version that names the server's release in traces: FerretDB's own where it reports
    /// one, else the MongoDB version the server reports.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn family_version(&self) -> &str {
        match &self.flavor {
            ServerFlavor::FerretDb { version } => version,
            _ => &self.version,
        }
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
