//! FerretDB 1.x, recognised by the `ferretdbVersion` of its `buildInfo` (`v1.…`), over SQLite or
//! PostgreSQL. It is end of life, so what it lacks is known rather than probed: single-document
//! updates are not atomic (it reads, modifies and writes back whole documents, so writers of the
//! same documents take turns under leased locks), no `$slice` projection, no projection in
//! `findAndModify` (whole documents come back), no `$text`, no partial indexes, no change
//! streams, no `$graphLookup`, no update pipelines; an unordered `update` stops at its first
//! failure; and only a filter that is exactly `{_id}` is evaluated in its engine, every other
//! filter decoding the whole collection, so stores address hot documents by `_id` alone there.

use super::super::capabilities::Capabilities;
use super::super::flavor::Topology;

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
pub(in crate::server) const FERRETDB_1_MAX_UPDATE_STATEMENTS: usize = 3;

/// Whether FerretDB's own `version` (`v1.24.2`) is a 1.x release.
pub(super) fn is_ferretdb1(version: &str) -> bool {
    version.starts_with("v1.")
}

/// What FerretDB 1.x can do in `topology` (it cannot be sharded).
pub(super) fn capabilities(topology: Topology, max_write_batch_size: usize) -> Capabilities {
    Capabilities {
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
        sharding: topology == Topology::Sharded,
        filters_beyond_id: false,
        retried_writes_applied_once: true,
        ordered_scans_forward_only: false,
        merged_key_ranges: false,
    }
}
