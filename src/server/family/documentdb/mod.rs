//! The DocumentDB engine on PostgreSQL, behind DocumentDB's own gateway (`pg_documentdb_gw`,
//! alone or sharded over Citus; Azure Cosmos DB for MongoDB vCore by the same design) or behind
//! FerretDB 2.x. Its gateway is recognised by the `internal` field of its `hello`, FerretDB 2.x
//! by its `ferretdb.version`. The engine gains operators from release to release and differs
//! from MongoDB in their semantics (its `$text` matches any quoted phrase, where MongoDB
//! requires all), so what it can do is probed; what is known is that a write command runs as
//! one PostgreSQL transaction, holding every row it locks until it ends, so its `update`
//! commands are kept small and a few are sent at once. On a sharded deployment it takes hashed
//! shard keys only, refuses `$graphLookup` from sharded collections, may apply a write that the
//! driver retried after a lost reply twice, and crashes (0.106 over Citus: a segfault in its
//! shard pruning) on an empty `$in` over a shard key, so the stores send no command for one. Its
//! errors carry PostgreSQL's SQLSTATEs ([`errors::sqlstate`]), which tell a deadlock or a restarting
//! database, both transient, from the rest.

pub(crate) mod errors;

use super::super::capabilities::Capabilities;
use super::super::flavor::Topology;
use super::super::probes::Probes;

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
pub(in crate::server) const DOCUMENTDB_MAX_UPDATE_STATEMENTS: usize = 16;
/// See [`DOCUMENTDB_MAX_UPDATE_STATEMENTS`].
pub(in crate::server) const DOCUMENTDB_UPDATE_COMMANDS_IN_FLIGHT: usize = 4;

/// What a DocumentDB server in `topology` can do: what `probes` found, with the engine's
/// tunings for write commands that are transactions.
pub(super) fn capabilities(
    topology: Topology,
    max_write_batch_size: usize,
    probes: &Probes,
) -> Capabilities {
    Capabilities {
        max_update_statements: max_write_batch_size.min(DOCUMENTDB_MAX_UPDATE_STATEMENTS),
        update_commands_in_flight: DOCUMENTDB_UPDATE_COMMANDS_IN_FLIGHT,
        write_commands_are_transactions: true,
        ordered_scans_forward_only: true,
        ..super::probed(topology, max_write_batch_size, probes)
    }
}
