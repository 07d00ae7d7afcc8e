//! Which server answered and how its deployment is laid out, read from its `buildInfo` and
//! `hello` replies.

use bson::Document;

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

/// How the deployment is laid out, from a `hello` (or `isMaster`) reply.
pub(super) fn topology_of(hello: &Document) -> Topology {
    if hello.get_str("msg") == Ok("isdbgrid") {
        Topology::Sharded
    } else if hello.contains_key("setName") {
        Topology::ReplicaSet
    } else {
        Topology::Standalone
    }
}
