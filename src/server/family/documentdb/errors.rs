//! What the DocumentDB engine's errors say: a PostgreSQL SQLSTATE packed into the code, or
//! (behind FerretDB 2.x) PostgreSQL's own words under `InternalError`, which tell a deadlock or a
//! restarting database, both transient, from the rest. Read by
//! [`crate::error::transient`] through the family module; imports nothing.

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

/// What DocumentDB says when an ordered scan of an index over an array gives up: the scan
/// remembers the rows it returned (an array puts a row under several keys) in a bitmap of
/// `work_mem`, and fails the read once that bitmap would lose precision (some hundreds of
/// thousands of rows read; `rum_multi_key_support.c` in DocumentDB 0.106).
const GAVE_UP_ORDER: &str = "cannot iterate over a lossy check on order by";

/// Whether a server error says an ordered scan of an index over an array read too many rows
/// to keep its order (see [`GAVE_UP_ORDER`]): the same read through an unordered index passes.
pub(crate) fn gave_up_ordered_scan(code: i32, message: &str) -> bool {
    code == INTERNAL_ERROR && message.to_lowercase().contains(GAVE_UP_ORDER)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sqlstates_packed_in_codes() {
        assert_eq!(sqlstate(16908292).as_deref(), Some("40P01"), "deadlock");
        assert_eq!(
            sqlstate(100663808).as_deref(),
            Some("08006"),
            "connection failure"
        );
        assert_eq!(sqlstate(11000), None, "MongoDB's own codes are small");
        assert!(server_says_transient(16908292) && !server_says_transient(INTERNAL_ERROR));
    }

    #[test]
    fn tells_an_abandoned_ordered_scan_from_other_internal_errors() {
        // As FerretDB 2.5 over DocumentDB 0.106 replied to a hinted page of 1,000,000 entries.
        let recorded = "Cannot iterate over a lossy check on order by";
        assert!(gave_up_ordered_scan(INTERNAL_ERROR, recorded));
        assert!(!gave_up_ordered_scan(INTERNAL_ERROR, "deadlock detected"));
        assert!(
            !gave_up_ordered_scan(2, recorded),
            "only under InternalError"
        );
    }
}
