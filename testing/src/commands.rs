//! Counting the commands a client sends, to check round trips ("one inbox page is one `find`").

use std::collections::{BTreeMap, BTreeSet};
use std::future::IntoFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bson::{Bson, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;

/// Commands a [`CommandCounter`] does not record; the same that
/// [`observe::attach`](mongo_social::observe::attach) does not count.
pub use mongo_social::observe::IGNORED_COMMANDS;

/// Records the name of every command a client starts, in order, so tests, benches and examples can
/// count round trips.
///
/// Clones share one record. Attach it to a client before the client is built:
///
/// ```no_run
/// # async fn example() -> mongodb::error::Result<()> {
/// use mongo_social_testing::CommandCounter;
/// use mongodb::{bson::doc, options::ClientOptions, Client};
///
/// let counter = CommandCounter::new();
/// let mut options = ClientOptions::parse("mongodb://127.0.0.1:27017/").await?;
/// counter.attach(&mut options);
/// let client = Client::with_options(options)?;
/// let items = client.database("app").collection::<bson::Document>("items");
///
/// let (_, commands) = counter.measure(items.find_one(doc! {})).await;
/// assert_eq!(commands, ["find"]);
/// # Ok(())
/// # }
/// ```
///
/// It also counts the documents the server returned to the counted commands
/// ([`CommandCounter::documents_read`]): what a read cost in documents, as well as in round trips.
///
/// Only `CommandStarted` events are recorded, and [`IGNORED_COMMANDS`] are left out, as are the
/// commands of capability probes (on collections named [`PROBE_COLLECTION_PREFIX`](mongo_social::server::PROBE_COLLECTION_PREFIX)...), which a
/// store sends once, on first use, to a server that is neither MongoDB nor FerretDB. The record
/// holds everything the client sends, so operations running concurrently on the same client (or a
/// `killCursors` the driver sends in the background after a cursor is dropped) show up too.
#[derive(Clone, Debug, Default)]
pub struct CommandCounter {
    names: Arc<Mutex<Vec<String>>>,
    /// The commands themselves, kept only by [`CommandCounter::keeping_commands`].
    commands: Option<Arc<Mutex<Vec<KeptCommand>>>>,
    /// Documents returned to counted commands since the last reset.
    documents: Arc<AtomicUsize>,
    /// Request ids of started commands that are not counted (probes, handshakes), whose replies
    /// are not counted either.
    uncounted: Arc<Mutex<BTreeSet<i32>>>,
}

/// A command's name and document, as [`CommandCounter::commands`] returns them.
pub type KeptCommand = (String, Document);

impl CommandCounter {
    /// An empty counter, attached to nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A counter that also keeps each counted command's document, for checks that read what
    /// was sent, such as the routing checks'. Costs a copy of every command: use it in tests
    /// that need it.
    pub fn keeping_commands() -> Self {
        Self {
            commands: Some(Arc::default()),
            ..Self::default()
        }
    }

    /// The counted commands since the last [`reset`](Self::reset), by name with their documents,
    /// if this counter keeps them ([`CommandCounter::keeping_commands`]); empty otherwise.
    pub fn commands(&self) -> Vec<KeptCommand> {
        self.commands
            .as_ref()
            .map(|commands| {
                commands
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
            })
            .unwrap_or_default()
    }

    /// Whether a command with this name is recorded (it is not one of [`IGNORED_COMMANDS`]).
    pub fn is_counted(command_name: &str) -> bool {
        mongo_social::observe::is_counted_name(command_name)
    }

    /// An event handler that records into this counter, for
    /// [`ClientOptions::command_event_handler`].
    pub fn handler(&self) -> EventHandler<CommandEvent> {
        let counter = self.clone();
        EventHandler::callback(move |event| match event {
            CommandEvent::Started(started) => {
                let counted = mongo_social::observe::is_counted(&started);
                if !counted {
                    counter.uncounted_lock().insert(started.request_id);
                    return;
                }
                counter.record(&started.command_name);
                if let Some(commands) = &counter.commands {
                    commands
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((started.command_name.clone(), started.command.clone()));
                }
            }
            CommandEvent::Succeeded(succeeded) => {
                let counted = !counter.uncounted_lock().remove(&succeeded.request_id);
                let documents = if counted {
                    returned(&succeeded.reply)
                } else {
                    0
                };
                counter.documents.fetch_add(documents, Ordering::Relaxed);
            }
            CommandEvent::Failed(failed) => {
                counter.uncounted_lock().remove(&failed.request_id);
            }
            _ => {}
        })
    }

    /// Sets `options.command_event_handler` to this counter's [`handler`](Self::handler),
    /// replacing any handler that was there.
    pub fn attach(&self, options: &mut ClientOptions) {
        options.command_event_handler = Some(self.handler());
    }

    /// Records one command by name, unless it is one of [`IGNORED_COMMANDS`].
    pub fn record(&self, command_name: &str) {
        if Self::is_counted(command_name) {
            self.lock().push(command_name.to_owned());
        }
    }

    /// Forgets everything recorded so far.
    pub fn reset(&self) {
        self.lock().clear();
        self.documents.store(0, Ordering::Relaxed);
        if let Some(commands) = &self.commands {
            commands
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        }
    }

    /// How many commands were recorded since the last [`reset`](Self::reset).
    pub fn total(&self) -> usize {
        self.lock().len()
    }

    /// How many documents the server returned to the counted commands since the last
    /// [`reset`](Self::reset): every document of a cursor's batches (`find`, `aggregate`,
    /// `getMore`) and a `findAndModify`'s value. Only replies to clients this counter is
    /// [attached](Self::attach) to are seen; [`record`](Self::record) adds none.
    pub fn documents_read(&self) -> usize {
        self.documents.load(Ordering::Relaxed)
    }

    /// How many commands named `command_name` (exactly, such as `"find"`) were recorded.
    pub fn count(&self, command_name: &str) -> usize {
        self.lock()
            .iter()
            .filter(|name| name.as_str() == command_name)
            .count()
    }

    /// The recorded command names, in the order the commands were started.
    pub fn names(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// How many times each command was recorded, by name.
    pub fn snapshot(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for name in self.lock().iter() {
            *counts.entry(name.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// Resets the counter, runs `operation` to completion and returns its output with the names
    /// of the commands started meanwhile, in order.
    ///
    /// Accepts futures and the driver's actions alike (`counter.measure(coll.find(filter))`).
    pub async fn measure<F, T>(&self, operation: F) -> (T, Vec<String>)
    where
        F: IntoFuture<Output = T>,
    {
        self.reset();
        let output = operation.await;
        (output, self.names())
    }

    fn uncounted_lock(&self) -> MutexGuard<'_, BTreeSet<i32>> {
        self.uncounted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<String>> {
        // The lock is only held for plain `Vec` operations, so a poisoned lock still holds a
        // consistent record.
        self.names.lock().unwrap_or_else(PoisonError::into_inner)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_returned_by_cursors_and_find_and_modify() {
        let batch = |name: &str, n: usize| {
            let documents: Vec<Bson> = (0..n)
                .map(|i| Bson::Document(bson::doc! { "i": i as i64 }))
                .collect();
            bson::doc! { "cursor": { name: documents, "id": 0_i64 }, "ok": 1.0 }
        };
        assert_eq!(returned(&batch("firstBatch", 3)), 3);
        assert_eq!(returned(&batch("nextBatch", 2)), 2);
        assert_eq!(
            returned(&bson::doc! { "value": { "_id": 1 }, "ok": 1.0 }),
            1
        );
        assert_eq!(returned(&bson::doc! { "value": Bson::Null, "ok": 1.0 }), 0);
        assert_eq!(
            returned(&bson::doc! { "n": 5, "ok": 1.0 }),
            0,
            "a write returns none"
        );
    }

    #[test]
    fn ignores_handshake_and_monitoring_commands() {
        let counter = CommandCounter::new();
        for name in [
            "hello",
            "isMaster",
            "ismaster",
            "buildInfo",
            "buildinfo",
            "saslStart",
            "saslContinue",
            "endSessions",
            "ping",
            "find",
            "getMore",
            "killCursors",
            "find",
        ] {
            counter.record(name);
        }
        assert_eq!(counter.names(), ["find", "getMore", "killCursors", "find"]);
        assert_eq!(counter.total(), 4);
        assert_eq!(counter.count("find"), 2);
        assert_eq!(counter.count("insert"), 0);
        assert_eq!(counter.snapshot().get("find"), Some(&2));
        counter.reset();
        assert_eq!(counter.total(), 0);
    }

    #[test]
    fn clones_share_one_record() {
        let counter = CommandCounter::new();
        counter.clone().record("insert");
        assert_eq!(counter.names(), ["insert"]);
    }
}
