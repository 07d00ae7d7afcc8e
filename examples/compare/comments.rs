//! The comments half of `compare`: the library's three strategies and the MongoDB manual's three
//! (`benches/support/seed_comments.rs`), posting, replying and reading pages of 50 as a
//! discussion grows.

use std::time::Instant;

use crate::comment_subjects::{self, Kind as SubjectKind, PageCase, Subject, View, PAGE};
use crate::report::{Area, Kind, Operation, Row, Who};
use crate::seed_comments::SeedComments;
use crate::{Bench, BoxResult};

pub const POST: &str = "post";
pub const REPLY: &str = "reply";
pub const PAGE_FIRST: &str = "page, first 50";
pub const PAGE_LAST: &str = "page, last 50";
pub const THREAD_LAST: &str = "thread, last 50";

/// The comment operations, in the order the table shows them.
pub const OPERATIONS: [Operation; 5] = [
    Operation {
        name: POST,
        area: Area::Comments,
        size: "comments in the discussion",
    },
    Operation {
        name: REPLY,
        area: Area::Comments,
        size: "comments in the discussion; threaded strategies only",
    },
    Operation {
        name: PAGE_FIRST,
        area: Area::Comments,
        size: "comments in the discussion; oldest first",
    },
    Operation {
        name: PAGE_LAST,
        area: Area::Comments,
        size: "comments in the discussion; oldest first, the last full page: offset N - 50 rounded down to a multiple of 50",
    },
    Operation {
        name: THREAD_LAST,
        area: Area::Comments,
        size: "comments in the discussion; threaded order, the last full page",
    },
];

/// How `subject` shows in the report: ours are compared with the manual's design of the same
/// shape.
fn who(subject: &Subject) -> Who {
    let (kind, seed) = match &subject.kind {
        SubjectKind::Seed(seed) => (Kind::Seed, *seed),
        SubjectKind::Ours(store) => (
            Kind::Library,
            match store.strategy().name() {
                "per-comment" => SeedComments::PerComment,
                "embedded" => SeedComments::Embedded,
                _ => SeedComments::Hybrid,
            },
        ),
    };
    Who {
        name: subject.name,
        kind,
        baseline: seed.name(),
    }
}

/// Grows one discussion per strategy (ours and the manual's) through `sizes` (increasing), and
/// at each size reads the first and the last page of 50 in every view it has; at the largest
/// size, then reads the storage per comment, and posts (and replies, where it has threads)
/// `bench.reps` times. Those `only` selects ([`crate::selected`]) run.
pub async fn run(bench: &Bench, sizes: &[usize], only: &str) -> BoxResult<Vec<Row>> {
    if !bench.server.seed.slice_projection {
        eprintln!(
            "  this server has no $slice projection: the seed's embedded and hybrid pages (and \
             our embedded strategy) read whole documents and slice them client-side"
        );
    }
    let mut rows = Vec::new();
    let mut databases = Vec::new();
    let subjects = comment_subjects::subjects(|name| {
        let db = bench
            .client
            .database(&mongo_social_lab::database_name(&format!(
                "cmp_comments_{}",
                name.replace([' ', '-'], "_")
            )));
        databases.push(db.clone());
        db
    });
    for db in &databases {
        db.drop().await?;
    }
    for subject in subjects.iter().filter(|s| crate::selected(s.name, only)) {
        rows.extend(measure(bench, subject, sizes).await?);
    }
    for db in &databases {
        db.drop().await?;
    }
    Ok(rows)
}

async fn measure(bench: &Bench, subject: &Subject, sizes: &[usize]) -> BoxResult<Vec<Row>> {
    let who = who(subject);
    subject.setup().await?;
    let mut rows = Vec::new();
    // Comments in the discussion, replies included, and the top-level ones to reply to.
    let mut total = 0_u64;
    let mut parents: Vec<String> = Vec::new();
    for &m in sizes {
        let m = m as u64;
        if let Err(reason) = subject.fits(m) {
            eprintln!("  {:<32} discussion of {m} skipped: {reason}", who.name);
            continue;
        }
        if total > m {
            eprintln!(
                "  {:<32} discussion of {m} skipped: it holds {total} already",
                who.name
            );
            continue;
        }
        let started = Instant::now();
        let links = subject.fill(bench.server, total, m, 4).await?;
        if parents.is_empty() {
            // Replies go to the first fill's comments: the seed's embedded design links by
            // position, which later fills (after replies) would not give.
            parents = links;
        }
        total = m;
        eprintln!(
            "  {:<32} discussion of {m} filled in {:.1} s",
            who.name,
            started.elapsed().as_secs_f64()
        );
        for case in subject.page_cases(m).await? {
            let operation = match (case.view, case.place) {
                (View::Chronological, "first") => PAGE_FIRST,
                (View::Chronological, _) => PAGE_LAST,
                (View::Threaded, "first") => continue,
                (View::Threaded, _) => THREAD_LAST,
            };
            let row = measure_page(bench, subject, who, operation, m, &case).await?;
            bench.progress(&row);
            rows.push(row);
        }
    }
    if total == 0 {
        return Ok(rows);
    }
    let m = total;
    let mut storage_row = Row::new(
        Area::Comments,
        who,
        "storage/comment, discussion of",
        m as usize,
    );
    storage_row.storage = Some(crate::storage::per_item(&subject.db, m as usize).await?);
    rows.push(storage_row);
    // Posts and replies last: replies would change what the seed's skip-based pages count
    // (its embedded chronological view holds top-level comments only).
    let mut post = Row::new(Area::Comments, who, POST, m as usize);
    let mut reply = Row::new(Area::Comments, who, REPLY, m as usize);
    for rep in 0..=bench.reps {
        // The first of each is a warm-up.
        let (millis, commands) = bench.time(subject.post(bench.server, total)).await?;
        total += 1;
        if rep > 0 {
            post.millis.push(millis);
            post.commands.push(commands);
        }
        if subject.threaded() {
            // Spread the replies over the discussion, so no thread grows much.
            let parent = &parents[(total as usize * 7) % parents.len()];
            let (millis, commands) = bench.time(subject.reply(parent, total)).await?;
            total += 1;
            if rep > 0 {
                reply.millis.push(millis);
                reply.commands.push(commands);
            }
        }
    }
    bench.progress(&post);
    rows.push(post);
    if subject.threaded() {
        bench.progress(&reply);
        rows.push(reply);
    }
    Ok(rows)
}

/// Reads the page `case` describes, one untimed warm-up and `bench.reps` timed.
async fn measure_page(
    bench: &Bench,
    subject: &Subject,
    who: Who,
    operation: &'static str,
    m: u64,
    case: &PageCase,
) -> BoxResult<Row> {
    let got = subject.read(bench.server, case).await?;
    if got != PAGE.min(m as usize) {
        return Err(format!("{} {operation} of {m}: {got} comments", who.name).into());
    }
    let mut row = Row::new(Area::Comments, who, operation, m as usize);
    for _ in 0..bench.reps {
        let (millis, commands) = bench.time(subject.read(bench.server, case)).await?;
        row.millis.push(millis);
        row.commands.push(commands);
    }
    Ok(row)
}
