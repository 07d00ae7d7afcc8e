//! What each command cost, from the driver's command monitoring: the command's name and
//! collection, the documents its reply returned, the documents it wrote, and the index entries
//! those writes touched.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bson::{Bson, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;

/// Totals over the commands since the last [`CommandLog::reset`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    pub commands: f64,
    pub documents_read: f64,
    pub documents_written: f64,
    pub index_entries_written: f64,
}

impl Totals {
    pub fn per(self, n: f64) -> Self {
        Self {
            commands: self.commands / n,
            documents_read: self.documents_read / n,
            documents_written: self.documents_written / n,
            index_entries_written: self.index_entries_written / n,
        }
    }
}

/// The fields a write changes in each document it matches, by statement.
#[derive(Clone, Debug)]
enum Change {
    /// Whole documents inserted or deleted: every index gets or loses an entry.
    Whole,
    /// Updates naming these top-level fields (`None`: a replacement or a pipeline).
    Fields(Option<Vec<String>>),
}

#[derive(Debug, Default)]
struct State {
    /// Started commands waiting for their reply, by request id: collection and change.
    pending: HashMap<i32, (String, Option<Change>)>,
    totals: Totals,
    /// Each collection's indexes, as lists of top-level key fields.
    indexes: HashMap<String, Vec<Vec<String>>>,
}

/// Collects [`Totals`] from a client's command events. Clones share one log.
#[derive(Clone, Debug, Default)]
pub struct CommandLog(Arc<Mutex<State>>);

impl CommandLog {
    pub fn handler(&self) -> EventHandler<CommandEvent> {
        let log = self.clone();
        EventHandler::callback(move |event| log.record(event))
    }

    pub fn reset(&self) {
        let mut state = self.lock();
        state.totals = Totals::default();
    }

    pub fn totals(&self) -> Totals {
        self.lock().totals
    }

    /// Tells the log which indexes `collection` has, so writes can be charged their entries.
    pub fn set_indexes(&self, collection: &str, keys: Vec<Vec<String>>) {
        self.lock().indexes.insert(collection.to_owned(), keys);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, event: CommandEvent) {
        match event {
            CommandEvent::Started(started) => {
                if !mongo_social_lab::CommandCounter::is_counted(&started.command_name) {
                    return;
                }
                let collection = started
                    .command
                    .get_str(&started.command_name)
                    .unwrap_or("")
                    .to_owned();
                let change = change_of(&started.command_name, &started.command);
                let mut state = self.lock();
                state.totals.commands += 1.0;
                state
                    .pending
                    .insert(started.request_id, (collection, change));
            }
            CommandEvent::Succeeded(succeeded) => {
                let mut state = self.lock();
                let Some((collection, change)) = state.pending.remove(&succeeded.request_id) else {
                    return;
                };
                let reply = &succeeded.reply;
                state.totals.documents_read += returned(reply) as f64;
                let written = written(&succeeded.command_name, reply);
                state.totals.documents_written += written as f64;
                let entries = match (&change, state.indexes.get(&collection)) {
                    (Some(Change::Whole), Some(indexes)) => written * indexes.len(),
                    (Some(Change::Fields(None)), Some(indexes)) => {
                        written * indexes.len().saturating_sub(1)
                    }
                    (Some(Change::Fields(Some(fields))), Some(indexes)) => {
                        let touched = indexes
                            .iter()
                            .filter(|key| key.iter().any(|field| fields.contains(field)))
                            .count();
                        written * touched
                    }
                    _ => 0,
                };
                state.totals.index_entries_written += entries as f64;
            }
            CommandEvent::Failed(failed) => {
                self.lock().pending.remove(&failed.request_id);
            }
            _ => {}
        }
    }
}

/// What a write command changes in the documents it matches.
fn change_of(name: &str, command: &Document) -> Option<Change> {
    match name {
        "insert" | "delete" => Some(Change::Whole),
        "update" => {
            let mut fields = Some(Vec::new());
            for statement in command.get_array("updates").ok()? {
                let update = statement.as_document()?.get("u")?;
                merge(&mut fields, updated_fields(update));
            }
            Some(Change::Fields(fields))
        }
        "findAndModify" => {
            if command.get_bool("remove").unwrap_or(false) {
                Some(Change::Whole)
            } else {
                Some(Change::Fields(updated_fields(command.get("update")?)))
            }
        }
        _ => None,
    }
}

fn merge(into: &mut Option<Vec<String>>, more: Option<Vec<String>>) {
    match (into.as_mut(), more) {
        (Some(fields), Some(more)) => fields.extend(more),
        _ => *into = None,
    }
}

/// The top-level fields an update names (`None` for a replacement or a pipeline).
fn updated_fields(update: &Bson) -> Option<Vec<String>> {
    let update = update.as_document()?;
    if !update.keys().all(|key| key.starts_with('$')) {
        return None;
    }
    Some(
        update
            .values()
            .filter_map(Bson::as_document)
            .flat_map(|fields| fields.keys())
            .map(|path| path.split('.').next().unwrap_or(path).to_owned())
            .collect(),
    )
}

/// Documents a reply returned: a cursor's batch, or a `findAndModify` value.
fn returned(reply: &Document) -> usize {
    if let Ok(cursor) = reply.get_document("cursor") {
        for batch in ["firstBatch", "nextBatch"] {
            if let Ok(batch) = cursor.get_array(batch) {
                return batch.len();
            }
        }
    }
    usize::from(matches!(reply.get("value"), Some(Bson::Document(_))))
}

/// Documents a write changed, inserted or deleted, from its reply.
fn written(name: &str, reply: &Document) -> usize {
    let number = |field: &str| match reply.get(field) {
        Some(Bson::Int32(n)) => *n as usize,
        Some(Bson::Int64(n)) => *n as usize,
        Some(Bson::Double(n)) => *n as usize,
        _ => 0,
    };
    match name {
        "insert" | "delete" => number("n"),
        "update" => {
            number("nModified")
                + reply
                    .get_array("upserted")
                    .map_or(0, |upserted| upserted.len())
        }
        "findAndModify" => reply
            .get_document("lastErrorObject")
            .ok()
            .and_then(|last| match last.get("n") {
                Some(Bson::Int32(n)) => Some(*n as usize),
                Some(Bson::Int64(n)) => Some(*n as usize),
                _ => None,
            })
            .unwrap_or(0),
        _ => 0,
    }
}
