//! Many update statements in as few `update` commands as the server allows.
//!
//! The driver's typed API sends one statement per command (or needs MongoDB 8's `bulkWrite`), so
//! strategies that update many documents at once build the `update` command themselves. Each
//! statement's fate is reported back by its position, so callers can retry exactly the ones that
//! failed, and [`UpdateBatch::run`] copes with servers that stop at the first failure.

use bson::{doc, Bson, Document};
use mongodb::Database;

use crate::server::Capabilities;
use crate::{Error, Result};

/// Bytes of statements per command: well under the 16 MiB command limit, leaving room for the
/// command's own fields.
const MAX_COMMAND_BYTES: usize = 8 * 1024 * 1024;
/// The duplicate key error code.
pub(crate) const DUPLICATE_KEY: i32 = 11000;

/// Update statements for one collection, sent unordered.
#[derive(Debug)]
pub(crate) struct UpdateBatch<'a> {
    database: &'a Database,
    collection: &'a str,
    statements: Vec<(Document, usize)>,
}

/// What became of the statements of a batch.
#[derive(Debug, Default)]
pub(crate) struct BatchOutcome {
    /// Statements that failed with a duplicate key error, by position in the batch.
    pub(crate) duplicate_key: Vec<usize>,
    /// Statements the server may not have run: on servers that stop an unordered batch at the
    /// first error (FerretDB 1.x), everything in a command that reported an error.
    pub(crate) unknown: Vec<usize>,
}

impl BatchOutcome {
    /// Statements whose effect must be checked before they are retried.
    pub(crate) fn suspects(&self) -> impl Iterator<Item = usize> + '_ {
        self.duplicate_key.iter().chain(&self.unknown).copied()
    }
}

impl<'a> UpdateBatch<'a> {
    pub(crate) fn new(database: &'a Database, collection: &'a str) -> Self {
        Self {
            database,
            collection,
            statements: Vec::new(),
        }
    }

    /// Adds `{q: filter, u: update, upsert}`.
    pub(crate) fn push(&mut self, filter: Document, update: Document, upsert: bool) -> Result<()> {
        let statement = doc! { "q": filter, "u": update, "upsert": upsert };
        let size = bson::to_vec(&statement)?.len();
        self.statements.push((statement, size));
        Ok(())
    }

    /// Runs every statement, in as few commands as the server's limits allow.
    ///
    /// Where the server does not run every statement of an unordered batch and report each
    /// failure by index ([`Capabilities::unordered_update_batches`]), a command that reports any
    /// error marks all its statements as unknown.
    ///
    /// # Errors
    ///
    /// Any failure other than a duplicate key ([`Error::Write`]), a write concern error, or a
    /// failed command.
    pub(crate) async fn run(self, capabilities: &Capabilities) -> Result<BatchOutcome> {
        let max_statements = capabilities.max_update_statements.max(1);
        let precise_errors = capabilities.unordered_update_batches;
        let mut outcome = BatchOutcome::default();
        let mut start = 0;
        while start < self.statements.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < self.statements.len()
                && end - start < max_statements
                && (end == start || bytes + self.statements[end].1 <= MAX_COMMAND_BYTES)
            {
                bytes += self.statements[end].1;
                end += 1;
            }
            let updates: Vec<Bson> = self.statements[start..end]
                .iter()
                .map(|(statement, _)| Bson::Document(statement.clone()))
                .collect();
            let mut command =
                doc! { "update": self.collection, "updates": updates, "ordered": false };
            // `run_command` does not apply the database's write concern by itself.
            if let Some(concern) = self.database.write_concern() {
                command.insert("writeConcern", bson::to_document(concern)?);
            }
            let reply = self.database.run_command(command).await?;
            record_reply(&reply, start, end, precise_errors, &mut outcome)?;
            start = end;
        }
        Ok(outcome)
    }
}

fn record_reply(
    reply: &Document,
    start: usize,
    end: usize,
    precise_errors: bool,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    if let Ok(concern) = reply.get_document("writeConcernError") {
        return Err(write_error(concern));
    }
    let Ok(errors) = reply.get_array("writeErrors") else {
        return Ok(());
    };
    let mut indexes = Vec::with_capacity(errors.len());
    for error in errors {
        let Bson::Document(error) = error else {
            continue;
        };
        if code_of(error) != Some(DUPLICATE_KEY) {
            return Err(write_error(error));
        }
        let index = error.get("index").and_then(bson_index).unwrap_or(0);
        indexes.push(start + index);
    }
    if indexes.is_empty() {
        return Ok(());
    }
    if precise_errors {
        outcome.duplicate_key.extend(indexes);
    } else {
        outcome.unknown.extend(start..end);
    }
    Ok(())
}

fn code_of(error: &Document) -> Option<i32> {
    match error.get("code")? {
        Bson::Int32(code) => Some(*code),
        Bson::Int64(code) => i32::try_from(*code).ok(),
        Bson::Double(code) => Some(*code as i32),
        _ => None,
    }
}

fn bson_index(value: &Bson) -> Option<usize> {
    match value {
        Bson::Int32(v) => usize::try_from(*v).ok(),
        Bson::Int64(v) => usize::try_from(*v).ok(),
        _ => None,
    }
}

fn write_error(error: &Document) -> Error {
    Error::Write {
        code: code_of(error).unwrap_or(-1),
        message: error.get_str("errmsg").unwrap_or("unknown").to_owned(),
    }
}

/// Whether a write failed only because a unique index already held the key.
pub(crate) fn is_duplicate_key(error: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*error.kind {
        ErrorKind::Write(WriteFailure::WriteError(write)) => write.code == DUPLICATE_KEY,
        ErrorKind::Command(command) => command.code == DUPLICATE_KEY,
        ErrorKind::InsertMany(failure) => {
            failure.write_concern_error.is_none()
                && failure.write_errors.as_ref().is_some_and(|errors| {
                    !errors.is_empty() && errors.iter().all(|write| write.code == DUPLICATE_KEY)
                })
        }
        _ => false,
    }
}

/// Inserts `document`; `false` (and nothing written) if a unique index already held its key.
pub(crate) async fn insert_once(
    collection: &mongodb::Collection<Document>,
    document: Document,
) -> crate::Result<bool> {
    match collection.insert_one(document).await {
        Ok(_) => Ok(true),
        Err(error) if is_duplicate_key(&error) => Ok(false),
        Err(error) => Err(error.into()),
    }
}
