//! Many update statements in as few `update` commands as the server allows.
//!
//! The driver's typed API sends one statement per command (or needs MongoDB 8's `bulkWrite`), so
//! strategies that update many documents at once build the `update` command themselves. Each
//! statement's fate is reported back by its position, so callers can retry exactly the ones that
//! failed, and [`UpdateBatch::run`] copes with servers that stop at the first failure.

use bson::{doc, Bson, Document, RawArrayBuf, RawDocumentBuf};

use futures::{StreamExt, TryStreamExt};
use mongodb::Database;

use crate::error::transient::{is_transient_code, is_transient_write_error};
use crate::error::{Error, Result};
use crate::retry::{Backoff, RetryPolicy};
use crate::server::{Capabilities, DetectedCapabilities};

/// Bytes of statements per command: well under the 16 MiB command limit, leaving room for the
/// command's own fields.
const MAX_COMMAND_BYTES: usize = 8 * 1024 * 1024;
/// The duplicate key error code.
pub(crate) const DUPLICATE_KEY: i32 = 11000;

/// Update statements for one collection, sent unordered.
///
/// Every statement must be idempotent (a `$set`, a `$max`, a `$push` whose filter excludes
/// documents already holding the element, ...): a statement that failed transiently, or whose
/// command's reply was lost, is sent again.
#[derive(Debug)]
pub(crate) struct UpdateBatch<'a> {
    database: &'a Database,
    /// The server's limits (statements per command, per-statement errors), detected on first use.
    capabilities: &'a DetectedCapabilities,
    retry: &'a RetryPolicy,
    collection: &'a str,
    statements: Vec<Statement>,
    /// Whether statements that may or may not have run are reported instead of sent again.
    report_unknown: bool,
}

#[derive(Debug)]
struct Statement {
    /// Position in the order the statements were pushed, as reported in [`BatchOutcome`].
    position: usize,
    /// The filter's first value, rendered: statements are sent ordered by it.
    key: String,
    /// The statement, encoded once: a command is these bytes one after the other, and a
    /// statement sent again is not encoded again.
    statement: RawDocumentBuf,
}

/// What became of the statements of a batch.
#[derive(Debug, Default)]
pub(crate) struct BatchOutcome {
    /// Statements that failed with a duplicate key error, by position in the batch.
    pub(crate) duplicate_key: Vec<usize>,
    /// Statements the server may not have run: on servers that stop an unordered batch at the
    /// first error (FerretDB 1.x), everything in a command that reported an error; and, for a
    /// batch that [reports them](UpdateBatch::report_unknown), the statements of a command that
    /// failed transiently.
    pub(crate) unknown: Vec<usize>,
    /// The transient failure that left statements [`unknown`](Self::unknown), for the caller to
    /// back off on before it checks them.
    pub(crate) transient: Option<Error>,
    /// Documents the statements matched (the replies' `n`, summed; upserts included). A
    /// statement resent after a failure counts again if it matches again.
    pub(crate) matched: u64,
}

impl BatchOutcome {
    /// Statements whose effect must be checked before they are retried.
    pub(crate) fn suspects(&self) -> impl Iterator<Item = usize> + '_ {
        self.duplicate_key.iter().chain(&self.unknown).copied()
    }
}

/// What one command left to do.
enum Sent {
    /// Every statement ran or was recorded in the outcome.
    Done,
    /// These statements (indexes into the batch's sorted statements) failed transiently.
    Again(Vec<usize>, Error),
}

impl<'a> UpdateBatch<'a> {
    /// No statements yet, for `collection` of `database`, sent under `retry` and the limits of
    /// the server `capabilities` describes.
    pub(crate) fn new(
        database: &'a Database,
        capabilities: &'a DetectedCapabilities,
        retry: &'a RetryPolicy,
        collection: &'a str,
    ) -> Self {
        Self {
            database,
            capabilities,
            retry,
            collection,
            statements: Vec::new(),
            report_unknown: false,
        }
    }

    /// Statements whose command failed transiently (a lost reply, a dropped connection, a
    /// deadlock where the server does not say which statements ran) are not sent again but
    /// reported in [`BatchOutcome::unknown`], with the failure in [`BatchOutcome::transient`],
    /// for the caller to check what landed. For statements whose "not already applied" guard a
    /// server may evaluate wrongly: FerretDB 1.x matches `$ne` on a path through an array of
    /// documents (`{"messages.id": {$ne: id}}`) even when the array holds `id`, so a blind resend
    /// there applies twice.
    pub(crate) fn report_unknown(mut self) -> Self {
        self.report_unknown = true;
        self
    }

    /// Adds `{q: filter, u: update, upsert}`, which must be idempotent.
    pub(crate) fn push(&mut self, filter: Document, update: Document, upsert: bool) -> Result<()> {
        self.add(filter, |q| doc! { "q": q, "u": update, "upsert": upsert })
    }

    /// Adds `{q: filter, u: pipeline, upsert}`: an update pipeline (see
    /// [`Capabilities::pipeline_updates`](crate::server::Capabilities::pipeline_updates)), which must be
    /// idempotent.
    pub(crate) fn push_pipeline(
        &mut self,
        filter: Document,
        pipeline: Vec<Document>,
        upsert: bool,
    ) -> Result<()> {
        self.add(filter, |q| doc! { "q": q, "u": pipeline, "upsert": upsert })
    }

    /// Adds `{q: filter, u: update, multi: true}` (every matching document), which must be
    /// idempotent.
    pub(crate) fn push_multi(&mut self, filter: Document, update: Document) -> Result<()> {
        self.add(filter, |q| doc! { "q": q, "u": update, "multi": true })
    }

    /// Whether no statement was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    fn add(
        &mut self,
        filter: Document,
        statement: impl FnOnce(Document) -> Document,
    ) -> Result<()> {
        let key = filter
            .iter()
            .next()
            .map(|(_, value)| value.to_string())
            .unwrap_or_default();
        let statement = bson::to_raw_document_buf(&statement(filter))?;
        self.statements.push(Statement {
            position: self.statements.len(),
            key,
            statement,
        });
        Ok(())
    }

    /// Runs every statement, in as few commands as the server's limits allow
    /// ([`Capabilities::max_update_statements`](crate::server::Capabilities::max_update_statements)),
    /// [`Capabilities::update_commands_in_flight`](crate::server::Capabilities::update_commands_in_flight)
    /// of them at once.
    ///
    /// Statements are sent in the order of their filter's first value (the owner, the `_id`), so
    /// concurrent batches touch shared documents in the same order: on engines that lock rows
    /// (DocumentDB over PostgreSQL) two senders then wait for each other instead of deadlocking.
    /// Statements that fail transiently (a deadlock, a write conflict, a lost connection: see
    /// [`Error::is_retryable`]) are sent again under the batch's [`RetryPolicy`].
    ///
    /// Where the server does not run every statement of an unordered batch and report each
    /// failure by index ([`Capabilities::unordered_update_batches`](crate::server::Capabilities::unordered_update_batches)), a command that reports any
    /// error marks all its statements as unknown.
    ///
    /// # Errors
    ///
    /// Any failure other than a duplicate key or a transient one ([`Error::Database`]), a write
    /// concern error, or a failed command; [`Error::RetriesExhausted`] when transient failures
    /// outlast the policy's budget (statements of earlier commands, and some of this one, may
    /// have run).
    pub(crate) async fn run(mut self) -> Result<BatchOutcome> {
        let capabilities = self.capabilities.get(self.database).await?;
        self.statements.sort_by(|a, b| a.key.cmp(&b.key));
        let precise_errors = capabilities.unordered_update_batches;
        let commands = self.commands(capabilities.max_update_statements.max(1));
        let batch = &self;
        let outcomes: Vec<BatchOutcome> = futures::stream::iter(commands)
            .map(|statements| async move {
                let mut outcome = BatchOutcome::default();
                batch
                    .run_command(statements, precise_errors, &mut outcome)
                    .await?;
                Ok::<_, Error>(outcome)
            })
            .buffer_unordered(capabilities.update_commands_in_flight.max(1))
            .try_collect()
            .await?;
        let mut outcome = BatchOutcome::default();
        for part in outcomes {
            outcome.duplicate_key.extend(part.duplicate_key);
            outcome.unknown.extend(part.unknown);
            outcome.transient = outcome.transient.or(part.transient);
            outcome.matched += part.matched;
        }
        Ok(outcome)
    }

    /// The statements of each command, in order: at most `max_statements` each, and no more
    /// bytes than [`MAX_COMMAND_BYTES`] unless a statement alone is larger.
    fn commands(&self, max_statements: usize) -> Vec<std::ops::Range<usize>> {
        let mut commands = Vec::new();
        let mut start = 0;
        while start < self.statements.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < self.statements.len()
                && end - start < max_statements
                && (end == start || bytes + self.statements[end].size() <= MAX_COMMAND_BYTES)
            {
                bytes += self.statements[end].size();
                end += 1;
            }
            commands.push(start..end);
            start = end;
        }
        commands
    }

    /// Runs the statements at `statements` in one command, sending those that failed
    /// transiently again under the batch's policy.
    async fn run_command(
        &self,
        statements: std::ops::Range<usize>,
        precise_errors: bool,
        outcome: &mut BatchOutcome,
    ) -> Result<()> {
        let mut pending: Vec<usize> = statements.collect();
        let mut backoff = Backoff::new(self.retry, "update batch");
        loop {
            let sent = backoff
                .attempt(Box::pin(self.send(&pending, precise_errors, outcome)))
                .await?;
            match sent {
                Sent::Done => return Ok(()),
                Sent::Again(again, error) => {
                    backoff.wait(error).await?;
                    pending = again;
                }
            }
        }
    }

    /// Sends the statements at `indexes` in one command.
    async fn send(
        &self,
        indexes: &[usize],
        precise_errors: bool,
        outcome: &mut BatchOutcome,
    ) -> Result<Sent> {
        let mut updates = RawArrayBuf::new();
        for &i in indexes {
            updates.push(self.statements[i].statement.clone());
        }
        let mut command = RawDocumentBuf::new();
        command.append("update", self.collection);
        command.append("updates", updates);
        command.append("ordered", false);
        // `run_command` does not apply the database's write concern by itself.
        let database = self.database;
        if let Some(concern) = database.write_concern() {
            command.append("writeConcern", bson::to_raw_document_buf(concern)?);
        }
        let reply = match database.run_raw_command(command).await {
            Ok(reply) => reply,
            Err(error) => {
                let error = Error::from(error);
                return if error.is_transient() {
                    // Whether any statement ran is unknown.
                    Ok(self.unknown(indexes, error, outcome))
                } else {
                    Err(error)
                };
            }
        };
        outcome.matched += reply.get("n").and_then(bson_index).unwrap_or(0) as u64;
        if let Ok(concern) = reply.get_document("writeConcernError") {
            return if is_transient_write_error(concern) {
                Ok(self.unknown(indexes, write_error(concern), outcome))
            } else {
                Err(write_error(concern))
            };
        }
        let Ok(errors) = reply.get_array("writeErrors") else {
            return Ok(Sent::Done);
        };
        let mut duplicates = Vec::with_capacity(errors.len());
        let mut again = Vec::new();
        let mut transient = None;
        for error in errors {
            let Bson::Document(error) = error else {
                continue;
            };
            let index = error.get("index").and_then(bson_index).unwrap_or(0);
            let Some(&statement) = indexes.get(index) else {
                continue;
            };
            if code_of(error) == Some(DUPLICATE_KEY) {
                duplicates.push(statement);
            } else if is_transient_write_error(error) {
                again.push(statement);
                transient = Some(write_error(error));
            } else {
                return Err(write_error(error));
            }
        }
        let any_error = !duplicates.is_empty() || !again.is_empty();
        if !precise_errors && any_error {
            // The server may have stopped at the first error: what follows it is unknown.
            if let Some(error) = transient {
                return Ok(self.unknown(indexes, error, outcome));
            }
            let positions = indexes.iter().map(|&i| self.statements[i].position);
            outcome.unknown.extend(positions);
            return Ok(Sent::Done);
        }
        outcome
            .duplicate_key
            .extend(duplicates.into_iter().map(|i| self.statements[i].position));
        Ok(match transient {
            Some(error) => Sent::Again(again, error),
            None => Sent::Done,
        })
    }
}

impl UpdateBatch<'_> {
    /// The statements at `indexes` may or may not have run after a transient `error`: sent
    /// again, or reported when the batch [reports them](Self::report_unknown).
    fn unknown(&self, indexes: &[usize], error: Error, outcome: &mut BatchOutcome) -> Sent {
        if !self.report_unknown {
            return Sent::Again(indexes.to_vec(), error);
        }
        let positions = indexes.iter().map(|&i| self.statements[i].position);
        outcome.unknown.extend(positions);
        outcome.transient = Some(error);
        Sent::Done
    }
}

impl Statement {
    /// Its encoded size in bytes.
    fn size(&self) -> usize {
        self.statement.as_bytes().len()
    }
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
    // Read from the reply here: the driver reported no error.
    Error::Database {
        code: code_of(error),
        message: error.get_str("errmsg").unwrap_or("unknown").to_owned(),
        source: None,
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
///
/// Idempotent under retries: the document gets its `_id` here if it has none, so a retried insert
/// meets the first one's key; and a duplicate key met by a retry, when the stored document is
/// `document` itself, is the first attempt's insert whose reply was lost: `true`. A duplicate key
/// on the first attempt is another writer's document, unless the driver may have sent that
/// attempt twice itself on a server that applies such a repeat again
/// ([`Capabilities::retried_writes_applied_once`] false); then it is read back as a retry's is.
///
/// The read-back's filter is the whole document, so that it names the collection's shard key
/// (whatever it is) and reaches one shard; `{_id}` alone where the server evaluates no other
/// filter in its engine ([`Capabilities::filters_beyond_id`] false: FerretDB 1.x, unsharded).
pub(crate) async fn insert_once_with(
    policy: &RetryPolicy,
    collection: &mongodb::Collection<Document>,
    mut document: Document,
    capabilities: &Capabilities,
) -> crate::error::Result<bool> {
    if !document.contains_key("_id") {
        document.insert("_id", bson::oid::ObjectId::new());
    }
    let document = &document;
    let mut retried = false;
    crate::retry::retry(policy, "insert", || {
        let attempt = document.clone();
        let first = !std::mem::replace(&mut retried, true);
        async move {
            match collection.insert_one(attempt).await {
                Ok(_) => Ok(true),
                Err(error) if is_duplicate_key(&error) => {
                    if first && capabilities.retried_writes_applied_once {
                        return Ok(false);
                    }
                    let filter = if capabilities.filters_beyond_id {
                        document.clone()
                    } else {
                        doc! { "_id": document.get("_id") }
                    };
                    let stored = collection.find_one(filter).await?;
                    Ok(stored.as_ref() == Some(document))
                }
                Err(error) => Err(error.into()),
            }
        }
    })
    .await
}

/// How an unordered `insert` of many documents failed.
pub(crate) enum InsertFailure {
    /// Only duplicate keys: these documents (by position) were refused, every other one stored.
    Duplicates(Vec<usize>),
    /// Duplicate keys and transient failures, or transient failures only: worth another attempt,
    /// which meets the documents this one stored as duplicates.
    Transient(Error),
    /// Anything else.
    Other(Error),
}

/// Sorts out an unordered `insert`'s failure: which documents met a duplicate key, and whether
/// what remains is transient.
pub(crate) fn insert_failure(error: mongodb::error::Error) -> InsertFailure {
    use mongodb::error::ErrorKind;
    if let ErrorKind::InsertMany(failure) = &*error.kind {
        let writes = failure.write_errors.as_deref().unwrap_or_default();
        let concern_ok = failure
            .write_concern_error
            .as_ref()
            .is_none_or(|concern| is_transient_code(concern.code));
        let known = writes
            .iter()
            .all(|write| write.code == DUPLICATE_KEY || is_transient_code(write.code));
        if concern_ok && known {
            let transient = writes.iter().find(|w| w.code != DUPLICATE_KEY);
            let reported = match (transient, &failure.write_concern_error) {
                (Some(write), _) => Some((write.code, write.message.clone())),
                (None, Some(concern)) => Some((concern.code, concern.message.clone())),
                (None, None) => None,
            };
            let Some((code, message)) = reported else {
                return InsertFailure::Duplicates(writes.iter().map(|w| w.index).collect());
            };
            return InsertFailure::Transient(Error::Database {
                code: Some(code),
                message,
                source: Some(error),
            });
        }
    }
    if is_duplicate_key(&error) {
        return InsertFailure::Duplicates(vec![0]);
    }
    InsertFailure::Other(error.into())
}

/// Inserts `documents` (one unordered `insert`), retrying transient failures under `policy`, and
/// takes a duplicate key as "already stored".
///
/// For callers whose documents carry keys that only this operation, or an earlier run of the
/// same operation, can have written (a message copy keyed by message and recipient): a retry
/// then meets its own earlier attempt's documents as duplicates, and those are done, as are
/// documents an earlier delivery of the same message stored.
pub(crate) async fn insert_many_once(
    policy: &RetryPolicy,
    collection: &mongodb::Collection<Document>,
    documents: Vec<Document>,
) -> Result<()> {
    let documents = &documents;
    crate::retry::retry(policy, "insert", || async move {
        match collection
            .insert_many(documents.iter().cloned())
            .ordered(false)
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => match insert_failure(error) {
                InsertFailure::Duplicates(_) => Ok(()),
                InsertFailure::Transient(error) | InsertFailure::Other(error) => Err(error),
            },
        }
    })
    .await
}
