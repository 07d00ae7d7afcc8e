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
//! errors carry PostgreSQL's SQLSTATEs ([`sqlstate`]), which tell a deadlock or a restarting
//! database, both transient, from the rest.

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
        ..super::probed(topology, max_write_batch_size, probes)
    }
}

/// MongoDB's `InternalError`, which FerretDB uses for failures of its PostgreSQL.
pub(crate) const INTERNAL_ERROR: i32 = 1;

/// What PostgreSQL and FerretDB's driver for it say when the backend is gone or not back yet
/// (lowercased), as FerretDB 2.x passes them on under [`INTERNAL_ERROR`].
const LOST_BACKEND_MESSAGES: &[&str] = &[
    "unexpected eof",
    "connection refused",
    "the database system is not yet accepting connections",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "terminating connection due to administrator command",
    "terminating connection due to unexpected postmaster exit",
    "server closed the connection unexpectedly",
    "failed to connect to",
    "conn closed",
    "broken pipe",
];

/// The PostgreSQL SQLSTATE a DocumentDB error code carries: DocumentDB reports a PostgreSQL
/// error as the SQLSTATE packed the way PostgreSQL's `MAKE_SQLSTATE` packs it (six bits a
/// character from `'0'`, the first character lowest), so deadlock `40P01` is 16908292. Only
/// codes whose fifth character is not `'0'` are read (smaller codes are MongoDB's own).
pub fn sqlstate(code: i32) -> Option<String> {
    if code < 1 << 24 {
        return None;
    }
    let state: String = (0..5)
        .map(|i| char::from(b'0' + ((code >> (6 * i)) & 0x3F) as u8))
        .collect();
    state
        .chars()
        .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        .then_some(state)
}

/// Whether a server error code is a DocumentDB code of PostgreSQL's class `40` (transaction
/// rollback: serialization failure, deadlock) or of a lost backend, which another attempt may
/// not meet.
pub(crate) fn server_says_transient(code: i32) -> bool {
    sqlstate(code).is_some_and(|state| state.starts_with("40") || lost_backend_state(&state))
}

/// A SQLSTATE of a connection that failed or a server that is shutting down or starting.
fn lost_backend_state(state: &str) -> bool {
    state.starts_with("08") || matches!(state, "57P01" | "57P02" | "57P03")
}

/// Whether a server error (its code and message) says the database behind the server is gone
/// or restarting.
pub(crate) fn is_lost_backend(code: i32, message: &str) -> bool {
    if sqlstate(code).is_some_and(|state| lost_backend_state(&state)) {
        return true;
    }
    if code != INTERNAL_ERROR {
        return false;
    }
    let message = message.to_lowercase();
    LOST_BACKEND_MESSAGES
        .iter()
        .any(|known| message.contains(known))
}
