//! mongo-java-server, an in-memory server for tests, recognised as a wire server without
//! MongoDB's `gitVersion` in `buildInfo` that answers only `isMaster` (it has no `hello`).
//! What it can do is probed: among other gaps it fails a `$slice: [skip, limit]` projection
//! that skips past the end of the array (MongoDB returns an empty array), has no `$text` and
//! no update pipelines; its change streams work (with its oplog on). It closes the connection
//! on an oversized request, which is why sizes are checked before anything is sent.

/// Whether a wire server that is neither MongoDB, FerretDB nor DocumentDB's gateway is
/// mongo-java-server: it answers `isMaster` only (`has_hello` false), as no other server we
/// know of without `gitVersion` does.
pub(super) fn recognised(has_hello: bool) -> bool {
    !has_hello
}
