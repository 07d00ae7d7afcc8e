//! The server families the library knows, one file each: how a family is recognised, what it
//! can do ([`Capabilities`]), its tunings, and why. Everything that differs between servers
//! starts here: the stores never ask which family they run on, only for intents that the
//! backend's dialect ([`crate::backend::dialect`]) answers from these capabilities.
//!
//! - [`mongodb`]: MongoDB itself, whose semantics the others are measured against;
//! - [`ferretdb1`]: FerretDB 1.x over SQLite or PostgreSQL (end of life, so known, not probed);
//! - [`documentdb`]: the DocumentDB engine on PostgreSQL, behind its own gateway (alone or
//!   sharded over Citus, as in Azure Cosmos DB for MongoDB vCore) or behind FerretDB 2.x;
//! - [`mongo_java_server`]: mongo-java-server, an in-memory server for tests;
//! - any other wire server ([`ServerFamily::Other`]): probed, with no tunings.
//!
//! To add a family: a file here with its recognition, its capabilities and its name, a variant
//! of [`ServerFamily`] matched in this file, and a row in `docs/SERVERS.md`.

pub(crate) mod documentdb;
pub(crate) mod errors;
pub(super) mod ferretdb1;
pub(super) mod mongo_java_server;
pub(super) mod mongodb;

use super::capabilities::Capabilities;
use super::flavor::{ServerFlavor, Topology};
use super::probes::Probes;

/// The family of servers that answered: one per file of this module, each with its own
/// capabilities and tunings, and the name that traces and metrics give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ServerFamily {
    /// MongoDB itself.
    MongoDb,
    /// FerretDB 1.x.
    FerretDb1,
    /// The DocumentDB engine, behind its gateway or FerretDB 2.x.
    DocumentDb,
    /// mongo-java-server.
    MongoJavaServer,
    /// A wire server the library does not know.
    Other,
}

impl ServerFamily {
    /// The family of a server of `flavor` that answered `hello` or not (`has_hello`).
    pub(crate) fn of(flavor: &ServerFlavor, has_hello: bool) -> Self {
        match flavor {
            ServerFlavor::MongoDb => Self::MongoDb,
            ServerFlavor::FerretDb { version } if ferretdb1::is_ferretdb1(version) => {
                Self::FerretDb1
            }
            ServerFlavor::FerretDb { .. } | ServerFlavor::DocumentDb => Self::DocumentDb,
            ServerFlavor::Other if mongo_java_server::recognised(has_hello) => {
                Self::MongoJavaServer
            }
            ServerFlavor::Other => Self::Other,
        }
    }

    /// The family's name in traces (the `server` field of detection's events).
    #[cfg_attr(not(any(feature = "tracing", test)), allow(dead_code))]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::MongoDb => "mongodb",
            Self::FerretDb1 => "ferretdb",
            Self::DocumentDb => "documentdb",
            Self::MongoJavaServer => "mongo-java-server",
            Self::Other => "other",
        }
    }

    /// Whether what the server can do is probed rather than known: every family but MongoDB
    /// and FerretDB 1.x (whose gaps are fixed: it is end of life).
    pub(crate) fn is_probed(self) -> bool {
        !matches!(self, Self::MongoDb | Self::FerretDb1)
    }

    /// What a server of this family, `version` (the MongoDB version it reports) and
    /// `topology` can do, from `probes` where the family is probed (everything probed missing
    /// if it was not).
    pub(super) fn capabilities(
        self,
        version: &str,
        topology: Topology,
        max_write_batch_size: usize,
        probes: Option<&Probes>,
    ) -> Capabilities {
        let probes = probes.copied().unwrap_or_default();
        match self {
            Self::MongoDb => mongodb::capabilities(version, topology, max_write_batch_size),
            Self::FerretDb1 => ferretdb1::capabilities(topology, max_write_batch_size),
            Self::DocumentDb => documentdb::capabilities(topology, max_write_batch_size, &probes),
            Self::MongoJavaServer | Self::Other => probed(topology, max_write_batch_size, &probes),
        }
    }
}

/// The capabilities of a server that is probed, with no tunings of its own: atomic updates
/// assumed (a race is no cheap probe), commands of as many statements as it takes, one at a
/// time.
pub(super) fn probed(
    topology: Topology,
    max_write_batch_size: usize,
    probes: &Probes,
) -> Capabilities {
    let sharding = topology == Topology::Sharded;
    Capabilities {
        atomic_updates: true,
        max_update_statements: max_write_batch_size,
        update_commands_in_flight: 1,
        write_commands_are_transactions: false,
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
        // The probe reads an unsharded collection; on a sharded deployment the graph's are
        // sharded, and DocumentDB refuses `$graphLookup` from them.
        graph_lookup: probes.graph_lookup && !sharding,
        sharding,
        // Not probed (a cost is no cheap probe): the wire servers we know of use their
        // indexes.
        filters_beyond_id: true,
        // Not probed (a lost reply is no cheap probe): only where the driver does not retry
        // writes by itself.
        retried_writes_applied_once: topology == Topology::Standalone,
        // Not probed (a plan is no cheap probe): the probed families (DocumentDB,
        // mongo-java-server) sort what an `$in` matches.
        merged_key_ranges: false,
        ordered_scans_forward_only: false,
    }
}
