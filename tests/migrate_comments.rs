//! Moving discussions between comment strategies while writers write: every supported pair
//! copied with concurrent posts, replies, edits, deletes and votes, then each discussion
//! compared; a copy killed and resumed; an abort; a cursor in flight at the cut-over; links
//! given out before the move; a pair refused (threads into a strategy without them).

use mongo_social_lab::SetUp;
use std::sync::Arc;
use std::time::Duration;

use mongo_social::comments::{
    Author, Comment, DynCommentTransfer, Embedded, HybridPages, NewComment, Order, PerComment, Vote,
};
use mongo_social::error::{Invalid, Limit};
use mongo_social::migrate::{CommentMigration, MigratingComments, Reads};
use mongo_social::prelude::*;
use mongo_social::{Error, PageRequest};
use mongo_social_lab as testing;
use mongodb::Database;

type Store = Arc<DynCommentTransfer>;

const DISCUSSIONS: [&str; 3] = ["d0", "d1", "d2"];
const USERS: [&str; 3] = ["u0", "u1", "u2"];

/// The three strategies in `db`, their collections named apart by `prefix` (pages of 5).
fn stores(db: &Database, prefix: &str) -> Vec<(&'static str, Store)> {
    vec![
        (
            "per-comment",
            Arc::new(
                PerComment::builder(db)
                    .collection_prefix(prefix)
                    .build()
                    .unwrap(),
            ) as Store,
        ),
        (
            "embedded",
            Arc::new(
                Embedded::builder(db)
                    .collection_prefix(prefix)
                    .build()
                    .unwrap(),
            ),
        ),
        (
            "hybrid-pages",
            Arc::new(
                HybridPages::builder(db)
                    .collection_prefix(prefix)
                    .page_size(5)
                    .build()
                    .unwrap(),
            ),
        ),
    ]
}

fn said(by: usize, text: String) -> NewComment {
    NewComment::new(Author::new(USERS[by % 3], USERS[by % 3]), text)
}

/// 30 comments in each discussion: replies where the store threads and `threads` says so,
/// every seventh edited, every ninth deleted, votes by three users.
async fn history(store: &Store, threads: bool) {
    store.set_up().await.unwrap();
    for discussion in DISCUSSIONS {
        store.create_discussion(discussion).await.unwrap();
        let mut links: Vec<String> = Vec::new();
        for i in 0..30 {
            let text = format!("{discussion} c{i}");
            let comment = match (threads, store.threaded()) {
                (true, Some(threaded)) if i % 3 != 0 => threaded
                    .reply(discussion, &links[i * 7 % links.len()], said(i, text))
                    .await
                    .unwrap(),
                _ => store.post(discussion, said(i, text)).await.unwrap(),
            };
            links.push(comment.link);
        }
        for (i, link) in links.iter().enumerate() {
            if i % 7 == 3 {
                store
                    .edit(discussion, link, &format!("{discussion} c{i} edited"))
                    .await
                    .unwrap();
            }
            for (u, user) in USERS.iter().enumerate() {
                if (i + u) % 4 == 0 {
                    let vote = if (i + u) % 8 == 0 {
                        Vote::Down
                    } else {
                        Vote::Up
                    };
                    store.vote(discussion, link, user, vote).await.unwrap();
                }
            }
        }
        for (i, link) in links.iter().enumerate() {
            if i % 9 == 4 {
                store.delete(discussion, link).await.unwrap();
            }
        }
    }
}

/// Writers through the migrating store: posts, replies (where it threads), edits, deletes,
/// votes and retractions, `writes` rounds over the discussions.
fn writers(
    store: Arc<MigratingComments>,
    seed: usize,
    writes: usize,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut mine: Vec<(String, String)> = Vec::new();
        for i in 0..writes {
            let discussion = DISCUSSIONS[(i + seed) % 3];
            let text = format!("live {seed}.{i}");
            let parent = mine
                .iter()
                .rev()
                .find(|(d, _)| d == discussion)
                .map(|(_, link)| link.clone());
            let comment = match (store.threaded(), parent) {
                (Some(threads), Some(parent)) if i % 3 == 1 => threads
                    .reply(discussion, &parent, said(i, text))
                    .await
                    .unwrap(),
                _ => store.post(discussion, said(i, text)).await.unwrap(),
            };
            let link = comment.link.clone();
            if i % 4 == 2 {
                store
                    .edit(discussion, &link, &format!("live {seed}.{i} edited"))
                    .await
                    .unwrap();
            }
            store
                .vote(discussion, &link, USERS[i % 3], Vote::Up)
                .await
                .unwrap();
            if i % 6 == 5 {
                store
                    .retract_vote(discussion, &link, USERS[i % 3])
                    .await
                    .unwrap();
            }
            if let Some((d, old)) = mine.iter().find(|(d, _)| d == discussion).cloned() {
                if i % 5 == 4 {
                    store
                        .vote(&d, &old, USERS[(i + 1) % 3], Vote::Down)
                        .await
                        .unwrap();
                }
            }
            if i % 7 == 6 {
                store.delete(discussion, &link).await.unwrap();
            } else {
                mine.push((discussion.to_owned(), link));
            }
            tokio::task::yield_now().await;
        }
        writes
    })
}

/// What a discussion shows, by text (links differ between strategies): the chronological view
/// with each comment's author, text, parent's text, tombstone, counts and every user's vote;
/// the threaded view's order where the store threads. A tombstone without replies is left out:
/// one strategy removes what another keeps as a tombstone, each by its own rule.
async fn shown(store: &DynCommentTransfer, discussion: &str) -> (Vec<String>, Vec<String>) {
    let mut all: Vec<Comment> = Vec::new();
    let mut page = store
        .chronological(discussion, Order::OldestFirst, PageRequest::first(7))
        .await
        .unwrap();
    loop {
        all.extend(page.items.iter().cloned());
        let Some(next) = page.next else { break };
        page = store
            .chronological(discussion, Order::OldestFirst, PageRequest::after(7, next))
            .await
            .unwrap();
    }
    // Tombstones whose replies are all gone, until none is left.
    loop {
        let parents: std::collections::HashSet<String> =
            all.iter().filter_map(|c| c.parent.clone()).collect();
        let before = all.len();
        all.retain(|c| !c.deleted || parents.contains(&c.link));
        if all.len() == before {
            break;
        }
    }
    let text_of = |link: &str| {
        all.iter()
            .find(|c| c.link == link)
            .map(|c| format!("{}{}", c.author.id, c.text))
    };
    let mut chronological = Vec::new();
    for c in &all {
        let mut votes = Vec::new();
        if !c.deleted {
            for user in USERS {
                votes.push(store.vote_of(discussion, &c.link, user).await.unwrap());
            }
        }
        chronological.push(format!(
            "{} {:?} parent {:?} deleted {} edited {} {:?} {:?}",
            c.author.id,
            c.text,
            c.parent.as_deref().map(text_of),
            c.deleted,
            c.edited.is_some(),
            if c.deleted { None } else { Some(c.votes) },
            votes,
        ));
    }
    let mut threaded = Vec::new();
    if let Some(threads) = store.threaded() {
        let mut page = threads
            .thread_page(discussion, Order::OldestFirst, PageRequest::first(9))
            .await
            .unwrap();
        loop {
            threaded.extend(
                page.items
                    .iter()
                    .filter(|c| all.iter().any(|kept| kept.link == c.link))
                    .map(|c| format!("{}{}", c.author.id, c.text)),
            );
            let Some(next) = page.next else { break };
            page = threads
                .thread_page(discussion, Order::OldestFirst, PageRequest::after(9, next))
                .await
                .unwrap();
        }
    }
    (chronological, threaded)
}

async fn same_everywhere(source: &Store, target: &Store, what: &str) {
    for discussion in DISCUSSIONS {
        let (chronological, threaded) = shown(&**source, discussion).await;
        let (moved, moved_threaded) = shown(&**target, discussion).await;
        assert_eq!(moved, chronological, "{what}: {discussion}, chronological");
        if !moved_threaded.is_empty() && !threaded.is_empty() {
            assert_eq!(moved_threaded, threaded, "{what}: {discussion}, threaded");
        }
    }
}

/// Runs the copy until it is done and `writing` (if any) has finished.
async fn copy_all(
    migration: &CommentMigration,
    writing: &[tokio::task::JoinHandle<usize>],
    what: &str,
) {
    // Rounds are counted once the writers are done (they always finish): the copy must finish
    // within a bounded number of rounds after that, however slow the writes.
    let mut rounds = 0;
    while writing.iter().any(|w| !w.is_finished()) || !migration.is_copied().await.unwrap() {
        migration.run_pending().await.unwrap();
        if writing.iter().all(|w| w.is_finished()) {
            rounds += 1;
        }
        assert!(rounds < 4000, "{what}: the copy never finished");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn discussions_move_between_every_pair_while_writers_write() {
    let t = testing::test_db("migrate_comments_every_pair").await;
    for i in 0..3 {
        for j in 0..3 {
            if i == j {
                continue;
            }
            let (from, source) = stores(&t.db, &format!("s{i}{j}_")).remove(i);
            let (to, target) = stores(&t.db, &format!("t{i}{j}_")).remove(j);
            let name = format!("{from} -> {to}");
            // Threads only where the target has them (a pair refusing them is tested apart).
            let threads = to != "hybrid-pages";
            history(&source, threads).await;
            let migration = CommentMigration::builder(
                &t.db,
                format!("c{i}{j}"),
                source.clone(),
                target.clone(),
            )
            .build()
            .unwrap();
            migration.start().await.unwrap();
            let store = migration.store();
            let writing = vec![writers(store.clone(), 0, 24), writers(store.clone(), 1, 24)];
            copy_all(&migration, &writing, &name).await;
            for w in writing {
                assert_eq!(w.await.unwrap(), 24);
            }
            let progress = migration.progress().await.unwrap();
            assert_eq!(progress.discussions_done, 3, "{name}: {progress:?}");
            assert_eq!(progress.discussions_total, 3, "{name}: {progress:?}");
            assert!(progress.comments_copied >= 80, "{name}: {progress:?}");
            same_everywhere(&source, &target, &name).await;
            // Reads moved per discussion: through the store, with the source's links.
            let (via_store, _) = shown_through(&store, "d1").await;
            let first = source
                .chronological("d1", Order::OldestFirst, PageRequest::first(500))
                .await
                .unwrap();
            let live = |c: &&Comment| !c.deleted;
            let links: Vec<String> = first
                .items
                .iter()
                .filter(live)
                .map(|c| c.link.clone())
                .collect();
            assert_eq!(
                via_store, links,
                "{name}: the store gives the source's links"
            );

            migration.finish().await.unwrap();
            tokio::time::sleep(Duration::from_millis(1100)).await;
            // A link given out before the move still reaches its comment.
            let old = first.items.iter().find(|c| !c.deleted).unwrap();
            assert_eq!(
                store.get("d1", &old.link).await.unwrap().text,
                old.text,
                "{name}"
            );
            // After the finish, writes reach the target alone.
            let before = source.count("d1").await.unwrap();
            let after = store.post("d1", said(0, "after".into())).await.unwrap();
            assert_eq!(target.get("d1", &after.link).await.unwrap().text, "after");
            assert_eq!(source.count("d1").await.unwrap(), before, "{name}");
        }
    }
}

/// The links the migrating store gives for `discussion`'s chronological view (tombstones
/// left out: each strategy keeps its own).
async fn shown_through(store: &MigratingComments, discussion: &str) -> (Vec<String>, usize) {
    let page = store
        .chronological(discussion, Order::OldestFirst, PageRequest::first(500))
        .await
        .unwrap();
    (
        page.items
            .iter()
            .filter(|c| !c.deleted)
            .map(|c| c.link.clone())
            .collect(),
        page.items.len(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_copy_resumes_and_an_abort_leaves_the_source_whole() {
    let t = testing::test_db("migrate_comments_resume_abort").await;
    let source = stores(&t.db, "ra_").remove(1).1;
    let target = stores(&t.db, "rb_").remove(0).1;
    history(&source, true).await;
    let migration = CommentMigration::builder(&t.db, "resume", source.clone(), target.clone())
        .job_lease(Duration::from_secs(2))
        .build()
        .unwrap();
    migration.start().await.unwrap();
    // A worker killed part way: its claimed job is taken over after its lease.
    let worker = migration.start_worker();
    let mut waited = 0;
    while migration.progress().await.unwrap().discussions_done < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
        assert!(waited < 3000, "the worker copied nothing");
    }
    worker.abort();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    copy_all(&migration, &[], "resumed").await;
    same_everywhere(&source, &target, "resumed").await;
    assert_eq!(migration.progress().await.unwrap().discussions_done, 3);

    // An abort: the target emptied, the source as it was, writes on the source alone.
    let mut before = Vec::new();
    for d in DISCUSSIONS {
        before.push(shown(&*source, d).await);
    }
    migration.abort().await.unwrap();
    assert!(target.is_empty().await.unwrap());
    let mut after = Vec::new();
    for d in DISCUSSIONS {
        after.push(shown(&*source, d).await);
    }
    assert_eq!(after, before);
    let store = migration.store();
    let posted = store
        .post("d0", said(1, "after abort".into()))
        .await
        .unwrap();
    assert_eq!(
        source.get("d0", &posted.link).await.unwrap().text,
        "after abort"
    );
    assert!(target.is_empty().await.unwrap());
    assert!(matches!(
        migration.finish().await,
        Err(Error::Precondition { .. })
    ));
}

#[tokio::test]
async fn a_cursor_in_flight_at_the_cut_over_and_one_discussion_moved() {
    let t = testing::test_db("migrate_comments_cursor").await;
    let source = stores(&t.db, "ca_").remove(0).1;
    let target = stores(&t.db, "cb_").remove(1).1;
    history(&source, true).await;
    // Only d1 moves; d0 and d2 stay on the source.
    let migration = CommentMigration::builder(&t.db, "cursor", source.clone(), target.clone())
        .reads(Reads::AllAtOnce)
        .discussions(["d1"])
        .build()
        .unwrap();
    migration.start().await.unwrap();
    let store = migration.store();
    let first = store
        .chronological("d1", Order::OldestFirst, PageRequest::first(5))
        .await
        .unwrap();
    let cursor = first.next.clone().expect("more than one page");
    assert!(matches!(
        migration.cut_over().await,
        Err(Error::Precondition { .. })
    ));
    copy_all(&migration, &[], "cursor").await;
    migration.cut_over().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Reads are on the target now; the source's cursor still reads on from the source.
    let next = store
        .chronological(
            "d1",
            Order::OldestFirst,
            PageRequest::after(5, cursor.clone()),
        )
        .await
        .unwrap();
    let expected = source
        .chronological(
            "d1",
            Order::OldestFirst,
            PageRequest::after(5, cursor.clone()),
        )
        .await
        .unwrap();
    assert_eq!(next.items, expected.items, "the old cursor is honoured");
    // The first page read again comes from the target, with the source's links.
    let again = store
        .chronological("d1", Order::OldestFirst, PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(again.items, first.items);
    // Only d1 moved.
    assert_eq!(target.count("d0").await.ok().unwrap_or(0), 0);
    assert!(target.count("d1").await.unwrap() > 0);
    let d0 = store
        .chronological("d0", Order::OldestFirst, PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(
        d0.items,
        source
            .chronological("d0", Order::OldestFirst, PageRequest::first(5))
            .await
            .unwrap()
            .items
    );
    // After the finish, the source's cursor is refused with a typed error; its links work.
    migration.finish().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(matches!(
        store
            .chronological("d1", Order::OldestFirst, PageRequest::after(5, cursor))
            .await,
        Err(Error::InvalidInput {
            reason: Invalid::Cursor { .. },
            ..
        })
    ));
    let old = &first.items[0];
    assert_eq!(store.get("d1", &old.link).await.unwrap().text, old.text);
    let reply = store
        .threaded()
        .expect("both strategies thread")
        .reply("d1", &old.link, said(2, "a reply after the move".into()))
        .await
        .unwrap();
    let parent = reply.parent.expect("a reply has a parent");
    assert_eq!(target.get("d1", &parent).await.unwrap().text, old.text);
    // d0, not moved, is written on the source still.
    let stay = store
        .post("d0", said(0, "still here".into()))
        .await
        .unwrap();
    assert_eq!(
        source.get("d0", &stay.link).await.unwrap().text,
        "still here"
    );
}

#[tokio::test]
async fn threads_into_a_strategy_without_them_are_refused_before_anything_is_written() {
    let t = testing::test_db("migrate_comments_refused").await;
    for source_index in [0, 1] {
        let source = stores(&t.db, &format!("fa{source_index}_"))
            .remove(source_index)
            .1;
        let target = stores(&t.db, &format!("fb{source_index}_")).remove(2).1;
        history(&source, true).await;
        let migration = CommentMigration::builder(
            &t.db,
            format!("refused{source_index}"),
            source.clone(),
            target.clone(),
        )
        .build()
        .unwrap();
        match migration.start().await {
            Err(Error::Unsupported {
                feature: "replies",
                limit: Limit::Strategy,
                reason,
                ..
            }) => assert!(
                // Every discussion has replies; which one is named is the engine's scan order
                // (on a sharded collection, whichever shard answers first).
                DISCUSSIONS
                    .iter()
                    .any(|d| reason.contains(&format!("discussion {d} "))),
                "{reason}"
            ),
            other => panic!("expected the pair refused, got {other:?}"),
        }
        assert!(target.is_empty().await.unwrap());
        assert!(matches!(
            migration.finish().await,
            Err(Error::Precondition { .. })
        ));
        // The import refuses replies too, before writing.
        let held = source.export("d0").await.unwrap();
        assert!(matches!(
            target.import("d0", &held).await,
            Err(Error::Unsupported { .. })
        ));
        assert!(target.is_empty().await.unwrap());
    }
    // Stores sharing a collection are refused at build.
    let shared = stores(&t.db, "same_");
    assert!(matches!(
        CommentMigration::builder(&t.db, "shared", shared[0].1.clone(), shared[1].1.clone())
            .build(),
        Err(Error::InvalidConfig { .. })
    ));
}

#[tokio::test]
async fn a_dual_write_costs_what_the_docs_say() {
    let t = testing::test_db("migrate_comments_costs").await;
    let source = stores(&t.db, "ka_").remove(1).1;
    let target = stores(&t.db, "kb_").remove(0).1;
    history(&source, true).await;
    let migration = CommentMigration::builder(&t.db, "costs", source.clone(), target.clone())
        .build()
        .unwrap();
    migration.start().await.unwrap();
    copy_all(&migration, &[], "costs").await;
    let store = migration.store();
    // What each store's own write costs here (the same discussion, warmed up).
    let commands = &t.commands;
    let counted = |names: Vec<String>| names.len();
    source.post("d2", said(0, "warm".into())).await.unwrap();
    commands.reset();
    let alone = source.post("d2", said(0, "alone".into())).await.unwrap();
    let source_post = counted(commands.names());
    let in_target = target.post("d2", said(0, "warm".into())).await.unwrap();
    commands.reset();
    target.post("d2", said(0, "alone".into())).await.unwrap();
    let target_post = counted(commands.names());
    commands.reset();
    source
        .edit("d2", &alone.link, "edited alone")
        .await
        .unwrap();
    let source_edit = counted(commands.names());
    commands.reset();
    target
        .edit("d2", &in_target.link, "edited alone")
        .await
        .unwrap();
    let target_edit = counted(commands.names());
    // Through the migrating store (the phase read within its second, as most writes find it).
    store.count("d2").await.unwrap();
    commands.reset();
    let posted = store.post("d2", said(1, "through".into())).await.unwrap();
    let names = commands.names();
    assert_eq!(
        names.len(),
        source_post + target_post + 4,
        "a post: the source's, the lock's insert and delete, the state's find, the target's, \
         the link map's insert: {names:?}"
    );
    store.count("d2").await.unwrap();
    commands.reset();
    store
        .edit("d2", &posted.link, "through, edited")
        .await
        .unwrap();
    let names = commands.names();
    assert_eq!(
        names.len(),
        source_edit + target_edit + 4,
        "an edit: the source's, the lock's 2, the state's find, the link map's find, the \
         target's: {names:?}"
    );
    testing::note(&format!(
        "embedded -> per-comment dual writes: post {} + {} + 4 commands, edit {} + {} + 4",
        source_post, target_post, source_edit, target_edit
    ));
}

#[tokio::test]
async fn every_strategy_imports_every_ones_export_once_and_same_strategies_keep_links() {
    let t = testing::test_db("transfer_comments_between_strategies").await;
    for i in 0..3 {
        for j in 0..3 {
            let (from, source) = stores(&t.db, &format!("xs{i}{j}_")).remove(i);
            let (to, target) = stores(&t.db, &format!("xt{i}{j}_")).remove(j);
            let name = format!("{from} -> {to}");
            history(&source, to != "hybrid-pages").await;
            target.set_up().await.unwrap();
            let mut listed = Vec::new();
            let mut discussions = source.discussions(None).await.unwrap();
            while let Some(d) = futures::TryStreamExt::try_next(&mut discussions)
                .await
                .unwrap()
            {
                listed.push(d);
            }
            assert_eq!(listed, DISCUSSIONS, "{name}: discussions in order");
            for discussion in DISCUSSIONS {
                let held = source.export(discussion).await.unwrap();
                let links = target.import(discussion, &held).await.unwrap();
                // Imported again (a lost reply, a copy run again): each comment once.
                let again = target.import(discussion, &held).await.unwrap();
                assert_eq!(again, links, "{name}: the same links again");
                if i == j {
                    let kept: Vec<String> = held.iter().map(|c| c.link.clone()).collect();
                    assert_eq!(links, kept, "{name}: links kept within a strategy");
                }
                let moved = target.export(discussion).await.unwrap();
                assert_eq!(moved.len(), held.len(), "{name}");
                for (m, h) in moved.iter().zip(&held) {
                    assert_eq!(
                        (&m.author, &m.text, m.posted, m.edited, m.deleted, m.votes, &m.voters),
                        (&h.author, &h.text, h.posted, h.edited, h.deleted, h.votes, &h.voters),
                        "{name}: {discussion}"
                    );
                }
            }
            same_everywhere(&source, &target, &name).await;
            target.purge("d0").await.unwrap();
            assert!(target.export("d0").await.unwrap().is_empty(), "{name}");
            assert!(!target.export("d1").await.unwrap().is_empty(), "{name}");
            target.purge_all().await.unwrap();
            assert!(target.is_empty().await.unwrap(), "{name}");
        }
    }
}
