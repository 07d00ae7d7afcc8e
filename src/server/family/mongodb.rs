//! MongoDB itself (Community, Enterprise or Atlas), recognised by the `gitVersion` of its
//! `buildInfo`: the semantics every other family is measured against. What it can do is known
//! from its version and topology, never probed: transactions and change streams need a replica
//! set or a `mongos`, and `$graphLookup` and `$lookup` read a sharded collection only from 5.1.

use super::super::capabilities::Capabilities;
use super::super::flavor::Topology;

/// What MongoDB `version` can do in `topology`.
pub(super) fn capabilities(
    version: &str,
    topology: Topology,
    max_write_batch_size: usize,
) -> Capabilities {
    let sharding = topology == Topology::Sharded;
    // `$graphLookup` and `$lookup` read a sharded collection from MongoDB 5.1 on.
    let joins_on_shards = !sharding || version_at_least(version, 5, 1);
    Capabilities {
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
        ordered_scans_forward_only: false,
        merged_key_ranges: true,
    }
}

/// Whether `version` (`"5.0.14"`) is `major.minor` or later.
pub(in crate::server) fn version_at_least(version: &str, major: u64, minor: u64) -> bool {
    let mut parts = version
        .split('.')
        .map(|part| part.parse::<u64>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}
