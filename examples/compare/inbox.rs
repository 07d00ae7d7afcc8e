//! The inbox half of `compare`: the library's three strategies, the seed blog post's three
//! designs and `FanOutOnWrite`'s layout written by hand, sending and reading.

use std::sync::Arc;
use std::time::Instant;

use bson::{doc, Document};
use futures::{StreamExt, TryStreamExt};
use mongo_social::{
    BucketedFanOut, DynInboxStore, FanOutOnRead, FanOutOnWrite, InboxStore, Message, NewMessage,
    PageRequest,
};
use mongodb::{Collection, Database};

use crate::bucket_load::load_buckets;
use crate::report::{Area, Kind, Operation, Row, Who};
use crate::seed_baselines::SeedBaseline;
use crate::{Bench, BoxResult};

/// The payload every message carries (90 bytes, a short chat message).
const PAYLOAD: &str =
    "Hi! Are we still on for the design review at 3? I moved the slides to the shared drive. -j";
/// The inbox the `read newest` figures read from, and whose storage is reported.
const READ_INBOX: usize = 1000;
/// How many of the newest messages each `read newest` figure asks for.
const READ_SIZES: [usize; 3] = [50, 100, 500];
/// The longest recipient list `FanOutOnWrite` (and its hand-written twin) keeps in every copy.
const MAX_INLINE_RECIPIENTS: usize = 16;
/// The owner of the read inbox.
const OWNER: &str = "bob";
/// Concurrent senders in the `8 senders` figure, and the messages each sends per repetition.
const SENDERS: usize = 8;
const MESSAGES_PER_SENDER: usize = 5;
/// Recipients of each message in the `8 senders` figure, from a ring of [`SENDERS`] users.
const RECIPIENTS_PER_MESSAGE: usize = 3;

pub const SEND: &str = "send";
pub const NEWEST_50: &str = "newest 50";
pub const READ_NEWEST: &str = "read newest";
pub const CONCURRENT: &str = "8 senders";

/// The inbox operations, in the order the table shows them.
pub const OPERATIONS: [Operation; 4] = [
    Operation {
        name: SEND,
        area: Area::Inbox,
        size: "recipients of one message",
    },
    Operation {
        name: NEWEST_50,
        area: Area::Inbox,
        size: "messages in the inbox read",
    },
    Operation {
        name: READ_NEWEST,
        area: Area::Inbox,
        size: "newest messages read from an inbox of 1,000",
    },
    Operation {
        name: CONCURRENT,
        area: Area::Inbox,
        size: "messages sent in all by 8 concurrent senders, 3 recipients each; latency and \
               commands for all of them",
    },
];

/// Who is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    Library(Lib),
    Seed(SeedBaseline),
    /// A library strategy's document layout (fan-out on read or on write), written and read
    /// with plain driver calls.
    HandWritten(Lib),
    /// The engine's floor for a copying strategy's send (sends only): fan-out on write, one
    /// unordered `insert` of N minimal copies `{recipient, sent, id, from, message}` (what a
    /// copy must carry to be shown) into a collection with one compound index
    /// `{recipient, sent, id}`; buckets, one unordered `update` of N statements, each pushing
    /// `{id, sent, from, message}` into one bucket addressed by `_id` (upserted), no other index.
    Floor(Lib),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    FanOutOnRead,
    FanOutOnWrite,
    Bucketed,
}

/// Everyone measured: the library's strategies, the seed's designs, the hand-written calls.
pub fn subjects() -> Vec<Subject> {
    let library = [Lib::FanOutOnRead, Lib::FanOutOnWrite, Lib::Bucketed].map(Subject::Library);
    let seed = SeedBaseline::ALL.map(Subject::Seed);
    library
        .into_iter()
        .chain(seed)
        .chain([Lib::FanOutOnRead, Lib::FanOutOnWrite].map(Subject::HandWritten))
        .chain([Lib::FanOutOnWrite, Lib::Bucketed].map(Subject::Floor))
        .collect()
}

/// Each library strategy written by hand, with the names they show under: (library, by hand).
pub const HAND_WRITTEN: [(&str, &str); 2] = [
    ("fan-out-on-read", "hand-written fan-out-on-read"),
    ("fan-out-on-write", "hand-written fan-out-on-write"),
];

impl Subject {
    pub fn who(self) -> Who {
        let seed = match self {
            Subject::Library(lib) | Subject::HandWritten(lib) | Subject::Floor(lib) => match lib {
                Lib::FanOutOnRead => SeedBaseline::FanOutOnRead,
                Lib::FanOutOnWrite => SeedBaseline::FanOutOnWrite,
                Lib::Bucketed => SeedBaseline::Bucketed,
            },
            Subject::Seed(seed) => seed,
        };
        let (name, kind) = match self {
            Subject::Library(Lib::FanOutOnRead) => ("fan-out-on-read", Kind::Library),
            Subject::Library(Lib::FanOutOnWrite) => ("fan-out-on-write", Kind::Library),
            Subject::Library(Lib::Bucketed) => ("bucketed-fan-out", Kind::Library),
            Subject::Seed(seed) => (seed.name(), Kind::Seed),
            Subject::HandWritten(Lib::FanOutOnRead) => (HAND_WRITTEN[0].1, Kind::HandWritten),
            Subject::HandWritten(_) => (HAND_WRITTEN[1].1, Kind::HandWritten),
            Subject::Floor(Lib::Bucketed) => ("floor: N pushes by _id", Kind::Floor),
            Subject::Floor(_) => ("floor: one insert of N copies", Kind::Floor),
        };
        Who {
            name,
            kind,
            baseline: seed.name(),
        }
    }

    fn is_bucketed(self) -> bool {
        matches!(
            self,
            Subject::Library(Lib::Bucketed) | Subject::Seed(SeedBaseline::Bucketed)
        )
    }

    /// How many sends may run at once while filling an inbox.
    fn fill_tasks(self, bench: &Bench) -> usize {
        match self {
            // The seed's upserts have no unique index behind them: concurrent sends to one owner
            // could create two `users` documents for it.
            Subject::Seed(SeedBaseline::Bucketed) => 1,
            // Without atomic updates, bucketed sends to one owner take turns under a lock.
            Subject::Library(Lib::Bucketed) if !bench.server.atomic_updates => 1,
            _ => 4,
        }
    }

    /// Creates the subject's indexes in `db` and returns something that can send and read there.
    async fn open(self, db: &Database) -> BoxResult<Target> {
        Ok(match self {
            Subject::Library(lib) => {
                let store: Arc<DynInboxStore<String>> = match lib {
                    Lib::FanOutOnRead => Arc::new(FanOutOnRead::new(db)),
                    Lib::FanOutOnWrite => Arc::new(FanOutOnWrite::new(db)),
                    Lib::Bucketed => Arc::new(BucketedFanOut::new(db)),
                };
                store.create_indexes().await?;
                Target::Store(store)
            }
            Subject::Seed(seed) => {
                seed.create_indexes(db).await?;
                Target::Seed(seed, db.clone())
            }
            Subject::HandWritten(Lib::FanOutOnRead) => {
                // The same index the library creates.
                InboxStore::<String>::create_indexes(&FanOutOnRead::new(db)).await?;
                Target::Hand(Lib::FanOutOnRead, db.collection("inbox"))
            }
            Subject::HandWritten(_) => {
                // The same indexes the library creates.
                InboxStore::<String>::create_indexes(&FanOutOnWrite::new(db)).await?;
                Target::Hand(Lib::FanOutOnWrite, db.collection("inbox_copies"))
            }
            Subject::Floor(lib) => {
                let collection = db.collection::<Document>("floor");
                if lib == Lib::FanOutOnWrite {
                    collection
                        .create_index(
                            mongodb::IndexModel::builder()
                                .keys(doc! { "recipient": 1, "sent": 1, "id": 1 })
                                .build(),
                        )
                        .await?;
                }
                Target::Floor(lib, db.clone())
            }
        })
    }
}

enum Target {
    Store(Arc<DynInboxStore<String>>),
    Seed(SeedBaseline, Database),
    Hand(Lib, Collection<Document>),
    Floor(Lib, Database),
}

impl Target {
    async fn send(&self, from: &str, to: &[String]) -> BoxResult<()> {
        match self {
            Target::Store(store) => {
                store
                    .send(NewMessage::new(
                        from,
                        to.iter().cloned(),
                        PAYLOAD.to_owned(),
                    ))
                    .await?;
            }
            Target::Seed(seed, db) => seed.send(db, from, to, PAYLOAD).await?,
            Target::Floor(lib, db) => {
                let (id, sent) = (bson::oid::ObjectId::new(), bson::DateTime::now());
                if *lib == Lib::FanOutOnWrite {
                    let copies = to.iter().map(|recipient| {
                        doc! {
                            "recipient": recipient, "sent": sent, "id": id,
                            "from": from, "message": PAYLOAD,
                        }
                    });
                    db.collection::<Document>("floor")
                        .insert_many(copies)
                        .ordered(false)
                        .await?;
                } else {
                    // One `update` command of N statements (the server's batch size allows
                    // 100,000), as the library sends its pushes.
                    let pushes: Vec<Document> = to
                        .iter()
                        .map(|recipient| {
                            doc! {
                                "q": { "_id": recipient },
                                "u": { "$push": { "messages": {
                                    "id": id, "sent": sent, "from": from, "message": PAYLOAD,
                                } } },
                                "upsert": true,
                            }
                        })
                        .collect();
                    db.run_command(doc! { "update": "floor", "updates": pushes, "ordered": false })
                        .await?;
                }
            }
            Target::Hand(lib, collection) => {
                let id = bson::oid::ObjectId::new();
                let mut message = doc! {
                    "id": id,
                    "from": from,
                    "to": to,
                    "sent": bson::DateTime::now(),
                    "message": PAYLOAD,
                };
                if *lib == Lib::FanOutOnRead {
                    // What `FanOutOnRead::send` stores: one document.
                    collection.insert_one(message).await?;
                } else {
                    // What `FanOutOnWrite::send` stores: a list of more than 16 recipients
                    // once, then one unordered `insert` of one copy per recipient.
                    if to.len() > MAX_INLINE_RECIPIENTS {
                        message.remove("to");
                        message.insert("to_count", to.len() as i64);
                        hand_lists(collection)
                            .insert_one(doc! { "_id": id, "to": to })
                            .await?;
                    }
                    let copies = to.iter().map(|recipient| {
                        let mut copy = message.clone();
                        copy.insert("recipient", recipient.as_str());
                        copy
                    });
                    collection.insert_many(copies).ordered(false).await?;
                }
            }
        }
        Ok(())
    }

    /// Reads the newest `n` messages of `owner` and returns how many came back.
    async fn read(&self, owner: &str, n: usize) -> BoxResult<usize> {
        Ok(match self {
            Target::Store(store) => store
                .inbox_page(owner, PageRequest::first(n))
                .await?
                .items
                .len(),
            Target::Seed(seed, db) => seed.read(db, owner, n).await?.len(),
            Target::Floor(..) => return Err("a floor has no inbox to read".into()),
            Target::Hand(lib, collection) => {
                let owner_field = if *lib == Lib::FanOutOnRead {
                    "to"
                } else {
                    "recipient"
                };
                let mut found: Vec<Document> = collection
                    .find(doc! { owner_field: owner })
                    .sort(doc! { "sent": -1, "id": -1 })
                    .limit(n as i64)
                    .batch_size(n as u32)
                    .await?
                    .try_collect()
                    .await?;
                // Copies whose list is stored once get it back, in one more `find`.
                let shared: Vec<bson::oid::ObjectId> = found
                    .iter()
                    .filter(|copy| copy.contains_key("to_count"))
                    .filter_map(|copy| copy.get_object_id("id").ok())
                    .collect();
                if !shared.is_empty() {
                    let lists: Vec<Document> = hand_lists(collection)
                        .find(doc! { "_id": { "$in": shared } })
                        .await?
                        .try_collect()
                        .await?;
                    for copy in &mut found {
                        let list = lists.iter().find(|list| {
                            list.get_object_id("_id").ok() == copy.get_object_id("id").ok()
                        });
                        if let Some(to) = list.and_then(|list| list.get("to")) {
                            copy.insert("to", to.clone());
                        }
                    }
                }
                let messages = found
                    .into_iter()
                    .map(bson::from_document::<Message<String>>)
                    .collect::<Result<Vec<_>, _>>()?;
                messages.len()
            }
        })
    }

    /// Loads messages `0..count` of [`fill_message`] into an empty bucketed inbox of `owner`
    /// in bulk, as `count` sends would have left it.
    async fn load(&self, owner: &str, count: usize) -> BoxResult<()> {
        let messages: Vec<(String, String)> = (0..count).map(fill_message).collect();
        match self {
            Target::Store(store) => {
                load_buckets(
                    store.database(),
                    "inbox_buckets",
                    "inbox_heads",
                    mongo_social::inbox::DEFAULT_BUCKET_SIZE,
                    owner,
                    &messages,
                )
                .await?
            }
            Target::Seed(SeedBaseline::Bucketed, db) => {
                crate::seed_baselines::bucketed_load(db, owner, &messages).await?
            }
            _ => return Err("only bucketed inboxes are loaded in bulk".into()),
        }
        Ok(())
    }
}

/// The hand-written fan-out on write's collection of long recipient lists, beside `copies`.
fn hand_lists(copies: &Collection<Document>) -> Collection<Document> {
    copies
        .client()
        .database(&copies.namespace().db)
        .collection("inbox_recipients")
}

/// Message `i` of an inbox fill: `(from, payload)`, from four senders in turn.
fn fill_message(i: usize) -> (String, String) {
    const FROM: [&str; 4] = ["joe", "jane", "li", "omar"];
    (FROM[i % FROM.len()].to_owned(), PAYLOAD.to_owned())
}

/// A send's latency at `n`, extrapolated from the last two sizes measured: FerretDB's costs grow
/// faster than linearly with N (every update statement scans its collection), so the growth
/// exponent is taken from the data, between 1 and 2.5 (2 when only one size is known).
fn predict(measured: &[(usize, f64)], n: usize) -> Option<f64> {
    let &(last_n, last_ms) = measured.last()?;
    let exponent = match measured.len().checked_sub(2).map(|i| measured[i]) {
        Some((prev_n, prev_ms)) if prev_ms > 0.0 && last_n > prev_n => {
            ((last_ms / prev_ms).ln() / (last_n as f64 / prev_n as f64).ln()).clamp(1.0, 2.5)
        }
        _ => 2.0,
    };
    Some(last_ms * (n as f64 / last_n as f64).powf(exponent))
}

/// Sizes for the inbox half.
pub struct Sizes {
    /// Recipients N of the `send` figures.
    pub recipients: Vec<usize>,
    /// Inbox sizes M the `newest 50` figures read at, in increasing order.
    pub inboxes: Vec<usize>,
}

/// Measures every subject `only` selects ([`crate::selected`]).
pub async fn run(bench: &Bench, sizes: &Sizes, only: &str) -> BoxResult<Vec<Row>> {
    let mut rows = Vec::new();
    for subject in subjects() {
        let who = subject.who();
        if !crate::selected(who.name, only) {
            continue;
        }
        // (N, median ms) of the sizes measured so far.
        let mut measured: Vec<(usize, f64)> = Vec::new();
        let mut storage_row = None;
        for &n in &sizes.recipients {
            let (row, storage) = measure_send(bench, subject, n, predict(&measured, n)).await?;
            bench.progress(&row);
            if !row.millis.is_empty() {
                measured.push((n, row.millis_median()));
            }
            rows.push(row);
            storage_row = storage.or(storage_row);
        }
        rows.extend(storage_row);
        if matches!(subject, Subject::Floor(_)) {
            // A floor is a send's; it has no inbox to read.
            continue;
        }
        rows.extend(measure_reads(bench, subject, &sizes.inboxes).await?);
        let concurrent = measure_concurrent(bench, subject).await?;
        bench.progress(&concurrent);
        rows.push(concurrent);
    }
    Ok(rows)
}

/// Measures a send to `n` recipients. `predicted_ms` (from the previous size) sets how many
/// repetitions fit in the budget; above the budget the latency is skipped, and where one send
/// fits the count budget, that one send (no warm-up) counts the commands. Returns the storage
/// per delivered copy too, for `n <= 100`.
async fn measure_send(
    bench: &Bench,
    subject: Subject,
    n: usize,
    predicted_ms: Option<f64>,
) -> BoxResult<(Row, Option<Row>)> {
    let mut row = Row::new(Area::Inbox, subject.who(), SEND, n);
    let predicted = predicted_ms.unwrap_or(0.0);
    if predicted > bench.budget_ms {
        row.cold = true;
        let over = format!(
            "predicted {:.0} s per send > budget {:.0} s (COMPARE_BUDGET_S)",
            predicted / 1000.0,
            bench.budget_ms / 1000.0
        );
        if predicted > bench.count_budget_ms {
            row.skipped = Some(format!("skipped: {over}"));
            return Ok((row, None));
        }
        let db = bench
            .fresh_db(&format!("{}_send_{n}", subject.who().name))
            .await?;
        let target = subject.open(&db).await?;
        let recipients: Vec<String> = (0..n).map(|i| format!("user{i:05}")).collect();
        let (_, commands) = bench.time(target.send("joe", &recipients)).await?;
        row.commands.push(commands);
        row.skipped = Some(format!(
            "latency skipped: {over}; commands counted from one cold send (COMPARE_COUNT_BUDGET_S)"
        ));
        db.drop().await?;
        return Ok((row, None));
    }
    let fit = (bench.budget_ms / predicted.max(1e-3)).floor() as usize;
    let reps = fit.saturating_sub(1).clamp(1, bench.reps);
    let warm_up = predicted * (reps as f64 + 1.0) <= bench.budget_ms;

    let db = bench
        .fresh_db(&format!("{}_send_{n}", subject.who().name))
        .await?;
    let target = subject.open(&db).await?;
    let recipients: Vec<String> = (0..n).map(|i| format!("user{i:05}")).collect();
    if warm_up {
        // Connections, and each recipient's first bucket / user document.
        target.send("joe", &recipients).await?;
    } else {
        row.skipped = Some("no warm-up (over budget)".to_owned());
        row.cold = true;
    }
    let figure_started = Instant::now();
    for _ in 0..reps {
        if !row.millis.is_empty()
            && figure_started.elapsed().as_secs_f64() * 1000.0 > bench.budget_ms
        {
            // Slower than predicted: keep what fits in the budget.
            break;
        }
        let (millis, commands) = bench.time(target.send("joe", &recipients)).await?;
        row.millis.push(millis);
        row.commands.push(commands);
    }
    // Storage per delivered copy, for a message with many recipients.
    let storage = if n <= 100 {
        let deliveries = (row.reps() + usize::from(warm_up)) * n;
        let mut storage_row = Row::new(Area::Inbox, subject.who(), "storage/delivery, send to", n);
        storage_row.storage = Some(crate::storage::per_item(&db, deliveries).await?);
        Some(storage_row)
    } else {
        None
    };
    db.drop().await?;
    Ok((row, storage))
}

/// Grows one inbox through `inboxes` sizes, reading the newest 50 at each; at [`READ_INBOX`]
/// also the newest 100 and 500, and the storage per message. On servers without atomic updates
/// each bucketed inbox is instead built afresh per size, loaded in bulk but for its last message
/// (which is sent): filling it through `send` there takes time growing with the square of the
/// size (`benches/support/bucket_load.rs`).
async fn measure_reads(bench: &Bench, subject: Subject, inboxes: &[usize]) -> BoxResult<Vec<Row>> {
    let db = bench
        .fresh_db(&format!("{}_read", subject.who().name))
        .await?;
    let mut target = subject.open(&db).await?;
    let to = [OWNER.to_owned()];
    let bulk = |m: usize| {
        subject.is_bucketed()
            && !crate::bucket_load::fill_through_send(m as u64, bench.server.atomic_updates)
    };
    let mut rows = Vec::new();
    let mut sizes: Vec<usize> = inboxes.to_vec();
    if !sizes.contains(&READ_INBOX) {
        sizes.push(READ_INBOX);
    }
    sizes.sort_unstable();
    let mut filled = 0;
    for m in sizes {
        let started = Instant::now();
        if bulk(m) {
            db.drop().await?;
            target = subject.open(&db).await?;
            target.load(OWNER, m - 1).await?;
            filled = m - 1;
        }
        futures::stream::iter(filled..m)
            .map(|i| {
                let (from, _) = fill_message(i);
                let target = &target;
                let to = &to;
                async move { target.send(&from, to).await }
            })
            .buffer_unordered(subject.fill_tasks(bench))
            .try_collect::<Vec<()>>()
            .await?;
        filled = m;
        eprintln!(
            "  {:<32} inbox of {m} {} in {:.1} s",
            subject.who().name,
            if bulk(m) {
                "loaded in bulk but the last message"
            } else {
                "filled"
            },
            started.elapsed().as_secs_f64()
        );
        if m == READ_INBOX {
            let mut storage_row =
                Row::new(Area::Inbox, subject.who(), "storage/message, inbox of", m);
            storage_row.storage = Some(crate::storage::per_item(&db, m).await?);
            rows.push(storage_row);
            for n in READ_SIZES {
                rows.push(measure_read(bench, &target, subject, READ_NEWEST, m, n).await?);
            }
        }
        if inboxes.contains(&m) {
            let row = measure_read(bench, &target, subject, NEWEST_50, m, 50).await?;
            bench.progress(&row);
            rows.push(row);
        }
    }
    db.drop().await?;
    Ok(rows)
}

/// Reads the newest `n` of an inbox of `m`, one untimed warm-up and `bench.reps` timed; the row
/// is `operation` at size `n` (`READ_NEWEST`) or `m` (`NEWEST_50`).
async fn measure_read(
    bench: &Bench,
    target: &Target,
    subject: Subject,
    operation: &'static str,
    m: usize,
    n: usize,
) -> BoxResult<Row> {
    let size = if operation == NEWEST_50 { m } else { n };
    let mut row = Row::new(Area::Inbox, subject.who(), operation, size);
    let got = target.read(OWNER, n).await?;
    if got != n.min(m) {
        return Err(format!(
            "{}: read {got} of the newest {n} of {m}",
            subject.who().name
        )
        .into());
    }
    for _ in 0..bench.reps {
        let (millis, commands) = bench.time(target.read(OWNER, n)).await?;
        row.millis.push(millis);
        row.commands.push(commands);
    }
    Ok(row)
}

/// The recipients of sender `s`: itself and its next two neighbours in a ring of [`SENDERS`]
/// users (as in `benches/inbox.rs`), so every user gets messages from three senders at once.
fn ring_recipients(s: usize) -> Vec<String> {
    (0..RECIPIENTS_PER_MESSAGE)
        .map(|r| format!("user{}", (s + r) % SENDERS))
        .collect()
}

/// [`SENDERS`] tasks each send [`MESSAGES_PER_SENDER`] messages to their [`ring_recipients`],
/// all at once; one untimed round first. A figure is one round: its latency and its commands in
/// all. Afterwards every user's inbox is counted: a library strategy that lost or duplicated a
/// message is an error; a seed design that did (the seed's bucketed upserts race) gets a note.
async fn measure_concurrent(bench: &Bench, subject: Subject) -> BoxResult<Row> {
    let messages = SENDERS * MESSAGES_PER_SENDER;
    let mut row = Row::new(Area::Inbox, subject.who(), CONCURRENT, messages);
    let db = bench
        .fresh_db(&format!("{}_concurrent", subject.who().name))
        .await?;
    let target = subject.open(&db).await?;
    let round = || {
        futures::future::try_join_all((0..SENDERS).map(|s| {
            let target = &target;
            async move {
                let from = format!("user{s}");
                let to = ring_recipients(s);
                for _ in 0..MESSAGES_PER_SENDER {
                    target.send(&from, &to).await?;
                }
                BoxResult::Ok(())
            }
        }))
    };
    round().await?;
    for _ in 0..bench.reps {
        let (millis, commands) = bench.time(round()).await?;
        row.millis.push(millis);
        row.commands.push(commands);
    }
    let expected = (bench.reps + 1) * MESSAGES_PER_SENDER * RECIPIENTS_PER_MESSAGE;
    let mut wrong = Vec::new();
    for user in 0..SENDERS {
        let owner = format!("user{user}");
        let got = target.read(&owner, expected + 1).await?;
        if got != expected {
            wrong.push(format!("{owner}: {got}"));
        }
    }
    if !wrong.is_empty() {
        let what = format!(
            "inboxes hold the wrong number of messages after concurrent sends (expected \
             {expected} each): {}",
            wrong.join(", ")
        );
        if subject.who().kind != Kind::Seed {
            return Err(format!("{}: {what}", subject.who().name).into());
        }
        row.skipped = Some(what);
    }
    db.drop().await?;
    Ok(row)
}
