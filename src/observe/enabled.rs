//! The `tracing` feature's half of [`super`]: operations' spans, and their command counts.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use tracing::{Instrument, Span};

use crate::error::{Error, Result};

tokio::task_local! {
    /// The command count of the operation whose future the current task is polling.
    static COMMANDS: Arc<AtomicUsize>;
    /// The number of the job queue worker running in the current task.
    static WORKER: u64;
}

/// The last worker number given out.
static WORKERS: AtomicU64 = AtomicU64::new(0);

/// Whether [`attach`] has been called: until then no command is seen, and `commands` is left
/// empty rather than recorded as zero.
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// The span of one operation, made by [`super::operation!`].
#[derive(Debug)]
pub(crate) struct Operation {
    span: Span,
}

impl Operation {
    pub(crate) fn new(span: Span) -> Self {
        Self { span }
    }

    /// Runs `work` in this span, counting the commands it starts; records `commands` and
    /// `outcome` (`ok` or the error's [`Error::kind`]) when it ends. Its commands count for an
    /// enclosing operation too.
    pub(crate) fn run<T, F>(self, work: F) -> impl Future<Output = Result<T>>
    where
        F: Future<Output = Result<T>>,
    {
        let span = self.span;
        // Boxed: operations nest (a delivery's job sends to inboxes, a send retries), and each
        // level would otherwise hold the whole state of the one it runs inline, several times.
        let work = Box::pin(work);
        async move {
            if span.is_disabled() {
                // Nobody listens: no span, and the commands count for the enclosing operation.
                return work.await;
            }
            let counter = Arc::new(AtomicUsize::new(0));
            let outcome = COMMANDS
                .scope(counter.clone(), work.instrument(span.clone()))
                .await;
            let commands = counter.load(Ordering::Relaxed);
            if ATTACHED.load(Ordering::Relaxed) {
                span.record("commands", commands);
            }
            span.record(
                "outcome",
                match &outcome {
                    Ok(_) => "ok",
                    Err(error) => error.kind(),
                },
            );
            let _ = COMMANDS.try_with(|enclosing| enclosing.fetch_add(commands, Ordering::Relaxed));
            outcome
        }
    }

    /// Like [`Operation::run`] for work whose output says how it went in its own `Result`: the
    /// outcome is the inner error's kind where the outer result is `Ok`.
    pub(crate) fn run_nested<T, F>(self, work: F) -> impl Future<Output = Result<Result<T>>>
    where
        F: Future<Output = Result<Result<T>>>,
    {
        let span = self.span.clone();
        let outcome = self.run(work);
        async move {
            let outcome = outcome.await;
            if let Ok(Err(error)) = &outcome {
                span.record("outcome", error.kind());
            }
            outcome
        }
    }

    /// Runs `work` in this span, recording nothing when it ends: background work (a worker's
    /// loop) whose operations have spans of their own.
    pub(crate) fn follow<F: Future>(self, work: F) -> impl Future<Output = F::Output> {
        work.instrument(self.span)
    }
}

/// The current span, for work spawned from it ([`Operation::follow`]).
pub(crate) fn current() -> Operation {
    Operation::new(Span::current())
}

/// Runs `work` (a job queue worker's loop) as the next worker number ([`worker_number`]).
pub(crate) fn worker<F: Future>(work: F) -> impl Future<Output = F::Output> {
    let number = WORKERS.fetch_add(1, Ordering::Relaxed) + 1;
    WORKER.scope(number, work)
}

/// The number of the worker running in this task, if a worker is ([`worker`]).
pub(crate) fn worker_number() -> Option<u64> {
    WORKER.try_with(|number| *number).ok()
}

/// See [`super::attach`].
pub(super) fn attach(options: &mut ClientOptions) {
    let next = options.command_event_handler.take();
    options.command_event_handler = Some(EventHandler::callback(move |event| {
        if let CommandEvent::Started(started) = &event {
            if super::is_counted(started) {
                // Outside an operation (the driver's own tasks), nothing to count.
                let _ = COMMANDS.try_with(|count| count.fetch_add(1, Ordering::Relaxed));
            }
        }
        if let Some(next) = &next {
            forward(next, event);
        }
    }));
    ATTACHED.store(true, Ordering::Relaxed);
}

/// Gives `event` to the handler that was set before [`attach`], as the driver would have.
fn forward(handler: &EventHandler<CommandEvent>, event: CommandEvent) {
    match handler {
        EventHandler::Callback(callback) => callback(event),
        EventHandler::AsyncCallback(callback) => {
            tokio::spawn(callback(event));
        }
        EventHandler::TokioMpsc(sender) => {
            let sender = sender.clone();
            tokio::spawn(async move {
                let _ = sender.send(event).await;
            });
        }
        _ => {}
    }
}

/// The driver's error label on `error` that says why it is retried (`RetryableWriteError`,
/// `TransientTransactionError`, ...), where it has one.
pub(crate) fn label(error: &Error) -> Option<String> {
    let source = match error {
        Error::Unreachable { source, .. } | Error::Database { source, .. } => source.as_ref()?,
        _ => return None,
    };
    let mut labels: Vec<&str> = source.labels().iter().map(String::as_str).collect();
    labels.sort_unstable();
    (!labels.is_empty()).then(|| labels.join(","))
}
