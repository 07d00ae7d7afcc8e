//! The comment conformance suite, run against every strategy on the real server, plus each
//! strategy's own checks.

use mongo_social::error::Invalid;
use mongo_social_lab::SetUp;
use std::sync::Arc;

use bson::{doc, Document};
use futures::FutureExt;
use mongo_social::comments::{
    Author, CommentStore, Deletion, Embedded, HybridPages, NewComment, Order, PerComment,
};
use mongo_social::{retry::RetryPolicy, Error, PageRequest};
use mongo_social_lab::comment_votes_suite as votes;
use mongo_social_lab::comments_suite::{self as suite, DISCUSSION};
use mongo_social_lab::{self as testing, TestDb};
use mongodb::Database;

fn per_comment(db: &Database) -> Arc<dyn CommentStore> {
    per_comment_with(db, RetryPolicy::default())
}

fn per_comment_with(db: &Database, retry: RetryPolicy) -> Arc<dyn CommentStore> {
    Arc::new(PerComment::builder(db).retry_policy(retry).build().unwrap())
}

fn embedded(db: &Database) -> Arc<dyn CommentStore> {
    embedded_with(db, RetryPolicy::default())
}

fn embedded_with(db: &Database, retry: RetryPolicy) -> Arc<dyn CommentStore> {
    Arc::new(Embedded::builder(db).retry_policy(retry).build().unwrap())
}

/// Pages of 5, so the suite's discussions span many pages.
fn hybrid(db: &Database) -> Arc<dyn CommentStore> {
    hybrid_with(db, RetryPolicy::default())
}

fn hybrid_with(db: &Database, retry: RetryPolicy) -> Arc<dyn CommentStore> {
    let builder = HybridPages::builder(db).page_size(5).retry_policy(retry);
    Arc::new(builder.build().unwrap())
}

fn new(text: &str) -> NewComment {
    NewComment::new(Author::new("u1", "Rick"), text)
}

/// Runs each suite check against one strategy, each in a fresh database.
macro_rules! conformance {
    ($design:ident, $with_retry:ident, post: $post:expr, posts_lock: $posts_lock:expr, vote_apply: $vote_apply:expr, after_outage: $after:ident) => {
        mod $design {
            use super::*;

            async fn store(test: &str) -> (TestDb, Arc<dyn CommentStore>) {
                let db =
                    testing::test_db(&format!("comments_{}_{test}", stringify!($design))).await;
                let store = super::$design(&db.db);
                store.set_up().await.expect("create indexes");
                (db, store)
            }

            #[tokio::test]
            async fn chronological_order() {
                let (_db, store) = store("chronological_order").await;
                suite::chronological_order(&*store).await;
            }

            #[tokio::test]
            async fn complete_pagination() {
                let (_db, store) = store("complete_pagination").await;
                suite::complete_pagination(&*store).await;
            }

            #[tokio::test]
            async fn pagination_while_posting() {
                let (_db, store) = store("pagination_while_posting").await;
                suite::pagination_while_posting(&*store).await;
            }

            #[tokio::test]
            async fn threaded_order() {
                let (_db, store) = store("threaded_order").await;
                suite::threaded_order(&*store).await;
            }

            #[tokio::test]
            async fn sub_threads() {
                let (_db, store) = store("sub_threads").await;
                suite::sub_threads(&*store).await;
            }

            #[tokio::test]
            async fn deep_replies() {
                let (_db, store) = store("deep_replies").await;
                suite::deep_replies(&*store).await;
            }

            #[tokio::test]
            async fn direct_links() {
                let (_db, store) = store("direct_links").await;
                suite::direct_links(&*store).await;
            }

            #[tokio::test]
            async fn edits_and_deletes() {
                let (_db, store) = store("edits_and_deletes").await;
                suite::edits_and_deletes(&*store).await;
            }

            #[tokio::test]
            async fn concurrent_posters() {
                let (_db, store) = store("concurrent_posters").await;
                suite::concurrent_posters(store, 6, 10).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn posted_agrees_with_position() {
                let (_db, store) = store("posted_agrees").await;
                suite::posted_agrees_with_position(store, 8, 6).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn survives_outage() {
                let t = testing::test_db(concat!(
                    "comments_",
                    stringify!($design),
                    "_survives_outage"
                ))
                .await;
                let proxy = testing::fault_proxy();
                let client = proxy.client_with(|_| {}).await;
                let store = super::$design(&client.database(t.db.name()));
                let impatient = proxy.impatient_client().await.database(t.db.name());
                let impatient = super::$with_retry(&impatient, testing::impatient_retry());
                store.set_up().await.expect("create indexes");
                suite::survives_outage(store, impatient, &proxy).await;
                super::$after(&t.db).await;
            }

            #[tokio::test]
            async fn bad_input() {
                let (t, store) = store("bad_input").await;
                let t = Arc::new(t);
                suite::bad_input(&*store, move || {
                    let t = t.clone();
                    async move { t.documents(&[]).await }.boxed()
                })
                .await;
            }

            #[tokio::test]
            async fn votes_change_and_retract() {
                let (_db, store) = store("votes_change_and_retract").await;
                votes::votes_change_and_retract(&*store).await;
            }

            #[tokio::test]
            async fn sort_orders() {
                let (_db, store) = store("sort_orders").await;
                votes::sort_orders(&*store).await;
            }

            #[tokio::test]
            async fn ranked_paging_while_voting() {
                let (_db, store) = store("ranked_paging_while_voting").await;
                votes::ranked_paging_while_voting(&*store).await;
            }

            #[tokio::test]
            async fn vote_bad_input() {
                let (t, store) = store("vote_bad_input").await;
                let t = Arc::new(t);
                votes::vote_bad_input(&*store, move || {
                    let t = t.clone();
                    async move { t.documents(&[]).await }.boxed()
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn concurrent_voters() {
                let (_db, store) = store("concurrent_voters").await;
                votes::concurrent_voters(store, 32, 4).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn votes_survive_outage() {
                let t =
                    testing::test_db(concat!("comments_", stringify!($design), "_votes_outage"))
                        .await;
                let proxy = testing::fault_proxy();
                let client = proxy.client_with(|_| {}).await;
                let store = super::$design(&client.database(t.db.name()));
                let impatient = proxy.impatient_client().await.database(t.db.name());
                let impatient = super::$with_retry(&impatient, testing::impatient_retry());
                store.set_up().await.expect("create indexes");
                votes::votes_survive_outage(store, impatient, &proxy).await;
            }

            #[tokio::test]
            async fn interrupted_votes_count_once() {
                let (t, store) = store("interrupted_votes").await;
                let collection = t.collection::<Document>("comment_votes");
                votes::interrupted_votes_count_once(&*store, collection).await;
            }

            #[tokio::test]
            async fn vote_command_counts() {
                let (t, store) = store("vote_command_counts").await;
                let locked = !t.info.capabilities().atomic_updates;
                votes::vote_command_counts(&*store, &t.commands, locked, &$vote_apply).await;
            }

            #[tokio::test]
            async fn reopen() {
                let t = testing::test_db(&format!("comments_{}_reopen", stringify!($design))).await;
                let (first, second) = (super::$design(&t.db), super::$design(&t.db));
                suite::reopen(&*first, &*second).await;
            }

            #[tokio::test]
            async fn without_create_indexes() {
                let t =
                    testing::test_db(&format!("comments_{}_no_indexes", stringify!($design))).await;
                suite::without_create_indexes(&*super::$design(&t.db)).await;
            }

            #[tokio::test]
            async fn command_counts() {
                let (t, store) = store("command_counts").await;
                let locked = $posts_lock && !t.info.capabilities().atomic_updates;
                suite::command_counts(&*store, &t.commands, locked, &$post).await;
            }

            #[tokio::test]
            async fn indexes_and_shard_keys() {
                let (t, store) = store("indexes_and_shard_keys").await;
                store.set_up().await.expect("create indexes again");
                for key in store.shard_keys() {
                    let first = key.key.keys().next().unwrap().as_str();
                    assert!(
                        first == "discussion_id" || first == "_id",
                        "{} leads with the discussion",
                        key.collection
                    );
                    assert!(!key.rationale.is_empty());
                }
                let error = store.threaded().map(|_| ()).ok_or(());
                assert_eq!(error.is_ok(), store.features().threading);
                let _ = t;
            }
        }
    };
}

/// Nothing more to check after an outage than the suite does.
async fn no_more_checks(_db: &Database) {}

/// No page of the hybrid store (pages of 5) past its cap after an outage, every page but the
/// last full.
async fn hybrid_pages_capped(db: &Database) {
    let store = HybridPages::builder(db).page_size(5).build().unwrap();
    let counts = store.page_counts(DISCUSSION).await.unwrap();
    assert!(!counts.is_empty());
    for (i, (page, count)) in counts.iter().enumerate() {
        assert_eq!(*page, i as u64, "pages in sequence");
        assert!(*count <= 5, "page {page} holds {count}");
        if i + 1 < counts.len() {
            assert_eq!(*count, 5, "page {page} is full before the next opens");
        }
    }
}

conformance!(per_comment, per_comment_with, post: ["find", "insert"], posts_lock: false,
    vote_apply: ["findAndModify", "update"], after_outage: no_more_checks);
conformance!(embedded, embedded_with, post: ["findAndModify"], posts_lock: true,
    vote_apply: ["update"], after_outage: no_more_checks);
conformance!(hybrid, hybrid_with, post: ["find", "update"], posts_lock: true,
    vote_apply: ["update"], after_outage: hybrid_pages_capped);

#[tokio::test]
async fn per_comment_refuses_replies_past_the_index_key_limit() {
    let t = testing::test_db("per_comment_key_limit").await;
    let store = PerComment::builder(&t.db)
        .max_key_bytes(200)
        .build()
        .unwrap();
    store.set_up().await.unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    let threads = store.threaded().unwrap();
    let mut link = store.post(DISCUSSION, new("root")).await.unwrap().link;
    // Each level adds 36 bytes to the 35 of the root's full_slug, plus 9 of discussion id:
    // depth 4 is 9 + 35 + 4 * 36 = 188 bytes, depth 5 would be 224.
    for _ in 1..=4 {
        link = threads
            .reply(DISCUSSION, &link, new("deeper"))
            .await
            .unwrap()
            .link;
    }
    let before = t.documents(&[]).await;
    let error = threads
        .reply(DISCUSSION, &link, new("too deep"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::ThreadTooDeep { depth: 5, .. },
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("224 bytes"), "{error}");
    assert_eq!(t.documents(&[]).await, before, "nothing written");
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 5);
}

/// Replies racing with the removal of their parent, and of their parent's parent right after:
/// every reply keeps an unbroken chain of ancestors (tombstones where they were deleted).
#[tokio::test]
async fn per_comment_reply_racing_delete_is_never_orphaned() {
    let t = testing::test_db("per_comment_reply_race").await;
    let store = Arc::new(PerComment::new(&t.db));
    store.set_up().await.unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    let threads = store.threaded().unwrap();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let grandparent = store
            .post(DISCUSSION, new(&format!("gp{i}")))
            .await
            .unwrap();
        let parent = threads
            .reply(DISCUSSION, &grandparent.link, new(&format!("parent{i}")))
            .await
            .unwrap();
        let deleter = store.clone();
        let (parent_link, grandparent_link) = (parent.link.clone(), grandparent.link.clone());
        tasks.push(tokio::spawn(async move {
            deleter.delete(DISCUSSION, &parent_link).await?;
            deleter
                .delete(DISCUSSION, &grandparent_link)
                .await
                .map(|_| ())
        }));
        let replier = store.clone();
        tasks.push(tokio::spawn(async move {
            let threads = replier.threaded().unwrap();
            match threads.reply(DISCUSSION, &parent.link, new("reply")).await {
                Ok(_) => Ok(()),
                // The delete won outright before the reply found its parent.
                Err(Error::NotFound { .. }) => Ok(()),
                Err(error) => Err(error),
            }
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let thread = suite::read_threaded(threads, Order::OldestFirst, 7).await;
    for comment in &thread {
        let mut ancestor = comment.parent.clone();
        while let Some(link) = ancestor {
            let found = store.get(DISCUSSION, &link).await.unwrap();
            assert!(found.deleted, "{link} was deleted, so it is a tombstone");
            assert!(
                thread.iter().position(|c| c.link == link)
                    < thread.iter().position(|c| c.link == comment.link),
                "{link} comes before its descendant {}",
                comment.link
            );
            ancestor = found.parent;
        }
    }
    let replies = thread.iter().filter(|c| c.depth == 2).count() as u64;
    assert_eq!(store.count(DISCUSSION).await.unwrap(), replies);
    assert!(thread.iter().filter(|c| !c.deleted).all(|c| c.depth == 2));
}

#[tokio::test]
async fn embedded_refuses_a_comment_past_the_document_limit() {
    let t = testing::test_db("embedded_document_limit").await;
    let store = Embedded::builder(&t.db)
        .max_document_bytes(4096)
        .build()
        .unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    let threads = store.threaded().unwrap();
    let mut posted = Vec::new();
    let error = loop {
        match store.post(DISCUSSION, new(&"x".repeat(300))).await {
            Ok(comment) => posted.push(comment),
            Err(error) => break error,
        }
        assert!(posted.len() < 20, "the limit was never reached");
    };
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::TooLarge {
                    what: "discussion",
                    limit: 4096,
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("HybridPages"),
        "suggests the hybrid strategy: {error}"
    );
    assert!(
        posted.len() >= 6,
        "{} comments of 300 bytes fit in 4 KiB",
        posted.len()
    );
    let error = threads
        .reply(DISCUSSION, &posted[0].link, new(&"y".repeat(300)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::TooLarge {
                    what: "discussion",
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
    let error = store
        .edit(DISCUSSION, &posted[0].link, &"z".repeat(1000))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::TooLarge {
                    what: "discussion",
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(store.count(DISCUSSION).await.unwrap(), posted.len() as u64);
    assert_eq!(
        store.get(DISCUSSION, &posted[0].link).await.unwrap(),
        posted[0]
    );
    // Deleting frees room, so a short comment fits again.
    assert_eq!(
        store.delete(DISCUSSION, &posted[1].link).await.unwrap(),
        Deletion::Tombstoned
    );
    store.post(DISCUSSION, new("short")).await.unwrap();
}

#[tokio::test]
async fn embedded_stops_before_16_mib() {
    let t = testing::test_db("embedded_16_mib").await;
    let store = Embedded::builder(&t.db)
        .max_comment_bytes(6 * 1024 * 1024)
        .build()
        .unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    let big = "x".repeat(5_000_000);
    for _ in 0..3 {
        store.post(DISCUSSION, new(&big)).await.unwrap();
    }
    let error = store.post(DISCUSSION, new(&big)).await.unwrap_err();
    match error {
        Error::InvalidInput {
            reason:
                Invalid::TooLarge {
                    what: "discussion",
                    size,
                    limit,
                },
            ..
        } => {
            assert_eq!(limit, Embedded::DEFAULT_MAX_DOCUMENT_BYTES);
            assert!(size > 20_000_000, "{size}");
        }
        other => panic!("expected DiscussionFull, got {other}"),
    }
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 3);
    let size = t
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": DISCUSSION })
        .await
        .unwrap()
        .map(|d| bson::to_vec(&d).unwrap().len())
        .unwrap();
    assert!(size < 16 * 1024 * 1024 && size > 15_000_000, "{size}");
}

#[tokio::test]
async fn embedded_lives_in_the_applications_document() {
    let t = testing::test_db("embedded_app_document").await;
    let articles = t.collection::<Document>("articles");
    articles
        .insert_one(doc! { "_id": DISCUSSION, "title": "Hello", "body": "w".repeat(1000) })
        .await
        .unwrap();
    let store = Embedded::builder(&t.db)
        .collection("discussions", "articles")
        .build()
        .unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    let first = store.post(DISCUSSION, new("first")).await.unwrap();
    assert_eq!(first.link, "0");
    let article = articles
        .find_one(doc! { "_id": DISCUSSION })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(article.get_str("title").unwrap(), "Hello");
    assert!(
        article.get_i64("bytes").unwrap() > 1000,
        "the article's own size is counted"
    );
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 1);
}

#[tokio::test]
async fn embedded_concurrent_replies_get_their_own_links() {
    let t = testing::test_db("embedded_concurrent_replies").await;
    let store = Arc::new(Embedded::new(&t.db));
    store.create_discussion(DISCUSSION).await.unwrap();
    let parent = store.post(DISCUSSION, new("parent")).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = store.clone();
        let parent = parent.link.clone();
        tasks.push(tokio::spawn(async move {
            let threads = store.threaded().unwrap();
            threads
                .reply(DISCUSSION, &parent, new(&format!("reply{i}")))
                .await
                .unwrap()
        }));
    }
    let mut links = std::collections::HashSet::new();
    for task in tasks {
        let reply = task.await.unwrap();
        assert!(
            links.insert(reply.link.clone()),
            "duplicate link {}",
            reply.link
        );
        assert_eq!(store.get(DISCUSSION, &reply.link).await.unwrap(), reply);
    }
    let expected: std::collections::HashSet<String> = (0..8).map(|i| format!("0.{i}")).collect();
    assert_eq!(links, expected);
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 9);
}

#[tokio::test]
async fn hybrid_pages_are_capped_and_never_duplicated() {
    let t = testing::test_db("hybrid_cap").await;
    let store = Arc::new(HybridPages::builder(&t.db).page_size(7).build().unwrap());
    store.set_up().await.unwrap();
    let dyn_store: Arc<dyn CommentStore> = store.clone();
    suite::concurrent_posters(dyn_store, 6, 12).await;
    let pages = store.page_counts(DISCUSSION).await.unwrap();
    let total: usize = pages.iter().map(|(_, count)| count).sum();
    assert_eq!(total, 6 + 6 * 12, "every comment in exactly one page");
    let numbers: Vec<u64> = pages.iter().map(|(page, _)| *page).collect();
    assert_eq!(
        numbers,
        (0..pages.len() as u64).collect::<Vec<_>>(),
        "one document per page"
    );
    let (last, full) = pages.split_last().unwrap();
    assert!(full.iter().all(|(_, count)| *count == 7), "{pages:?}");
    assert!(last.1 >= 1 && last.1 <= 7, "{pages:?}");
    // Direct links reach comments on every page.
    let all = suite::read_chronological(&*store, Order::NewestFirst, 50).await;
    for comment in all.iter().step_by(9) {
        assert_eq!(
            &store.get(DISCUSSION, &comment.link).await.unwrap(),
            comment
        );
    }
    let page = store
        .chronological(DISCUSSION, Order::OldestFirst, PageRequest::first(7))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 7);
}

/// 16 posters, 25 comments each, into one discussion of default-sized pages: every writer meets
/// the others on the same last page. Where updates are atomic the store runs without retries, so
/// a single transient failure (DocumentDB's "deadlock detected" among them) fails the test: a
/// post must not be able to deadlock with another at all, not merely survive it by retrying.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hybrid_posters_on_one_page_never_deadlock() {
    let t = testing::test_db("hybrid_no_deadlock").await;
    let retry = if t.info.capabilities().atomic_updates {
        RetryPolicy::never()
    } else {
        // Writers take turns through lease locks there, which wait under the retry policy.
        RetryPolicy::default()
    };
    let store = Arc::new(
        HybridPages::builder(&t.db)
            .retry_policy(retry)
            .build()
            .unwrap(),
    );
    store.set_up().await.unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    let (posters, each) = (16, 25);
    let tasks: Vec<_> = (0..posters)
        .map(|poster| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..each {
                    let author = Author::new(format!("user{poster}"), "Poster");
                    store
                        .post(
                            DISCUSSION,
                            NewComment::new(author, format!("p{poster}-{i}")),
                        )
                        .await
                        .unwrap_or_else(|error| panic!("post p{poster}-{i}: {error:?}"));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("poster");
    }
    let all = suite::read_chronological(&*store, Order::OldestFirst, 100).await;
    assert_eq!(all.len(), posters * each, "every post, once");
    for poster in 0..posters {
        let mine: Vec<&str> = all
            .iter()
            .filter(|c| c.author.id == format!("user{poster}"))
            .map(|c| c.text.as_str())
            .collect();
        let expected: Vec<String> = (0..each).map(|i| format!("p{poster}-{i}")).collect();
        assert_eq!(
            mine, expected,
            "poster {poster}'s comments, once each, in order"
        );
    }
    let pages = store.page_counts(DISCUSSION).await.unwrap();
    assert_eq!(pages, [(0, 100), (1, 100), (2, 100), (3, 100)]);
}

/// Pages filled by the manual's own algorithm (a page is left once it holds *more* than 100, so
/// concurrent writers overfill it: 100, 102, 101, 22) read correctly: every page size walks all
/// 325 comments in order, without repeats, in both orders; direct links, counts and new posts
/// work on them.
#[tokio::test]
async fn hybrid_reads_pages_overfilled_by_the_manuals_algorithm() {
    let t = testing::test_db("hybrid_manual_pages").await;
    let store = HybridPages::new(&t.db);
    store.set_up().await.unwrap();
    store.create_discussion(DISCUSSION).await.unwrap();
    let start = bson::DateTime::now().timestamp_millis() - 3_600_000;
    let mut n = 0;
    let mut pages = Vec::new();
    for (page, count) in [100, 102, 101, 22].into_iter().enumerate() {
        let comments: Vec<Document> = (0..count)
            .map(|_| {
                n += 1;
                doc! {
                    "slug": format!("{n:016x}"),
                    "posted": bson::DateTime::from_millis(start + n * 1000),
                    "author": { "id": "u1", "name": "Rick" },
                    "text": format!("m{n}"),
                    "deleted": false,
                }
            })
            .collect();
        // This strategy's layout, filled the manual's way.
        pages.push(doc! {
            "_id": format!("{DISCUSSION}/{page}"),
            "discussion_id": DISCUSSION,
            "page": page as i64,
            "count": count,
            "visible": count,
            "comments": comments,
        });
    }
    t.collection::<Document>("comment_pages")
        .insert_many(pages)
        .await
        .unwrap();
    let expected: Vec<String> = (1..=325).map(|n| format!("m{n}")).collect();
    let mut reversed = expected.clone();
    reversed.reverse();
    for limit in [1, 7, 50, 99, 100, 101, 102, 150, 325, 1000] {
        let oldest = suite::read_chronological(&store, Order::OldestFirst, limit).await;
        let texts: Vec<String> = oldest.iter().map(|c| c.text.clone()).collect();
        assert_eq!(texts, expected, "oldest first, pages of {limit}");
        let newest = suite::read_chronological(&store, Order::NewestFirst, limit).await;
        let texts: Vec<String> = newest.iter().map(|c| c.text.clone()).collect();
        assert_eq!(texts, reversed, "newest first, pages of {limit}");
    }
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 325);
    let on_overfilled_page = format!("{:016x}", 202);
    assert_eq!(
        store
            .get(DISCUSSION, &on_overfilled_page)
            .await
            .unwrap()
            .text,
        "m202"
    );
    // Posting goes on after the last page, and the walk includes it.
    store.post(DISCUSSION, new("after")).await.unwrap();
    let newest = store
        .chronological(DISCUSSION, Order::NewestFirst, PageRequest::first(2))
        .await
        .unwrap();
    let texts: Vec<&str> = newest.items.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, ["after", "m325"]);
    assert_eq!(
        suite::read_chronological(&store, Order::OldestFirst, 50)
            .await
            .len(),
        326
    );
}

// --- Ranked threads in a bounded number of reads ------------------------------------------------

#[tokio::test]
async fn per_comment_ranked_thread_matches_per_level_reads() {
    let t = testing::test_db("comments_per_comment_ranked_thread").await;
    let store = PerComment::new(&t.db);
    store.set_up().await.unwrap();
    // The top level's index range, then one `find` per level of replies.
    votes::ranked_thread_matches_per_level_reads(&store, store.as_threaded(), &t.commands, |d| {
        1 + d
    })
    .await;
}

#[tokio::test]
async fn embedded_ranked_thread_matches_per_level_reads() {
    let t = testing::test_db("comments_embedded_ranked_thread").await;
    let store = Embedded::new(&t.db);
    store.set_up().await.unwrap();
    // The discussion's document, once.
    votes::ranked_thread_matches_per_level_reads(&store, store.as_threaded(), &t.commands, |_| 1)
        .await;
}

// --- Discussions created by their first post ----------------------------------------------------

/// Each strategy built to create discussions on post: concurrent first posts to a discussion
/// nobody created all land, once each, and register it once; the same store without the option
/// still refuses a post to a discussion not created, writing nothing.
#[tokio::test]
async fn a_first_post_creates_its_discussion_when_the_store_is_built_to() {
    let t = testing::test_db("comments_create_on_post").await;
    // Each strategy: built to create discussions on post, and not.
    type Pair = (&'static str, Arc<dyn CommentStore>, Arc<dyn CommentStore>);
    let stores: Vec<Pair> = vec![
        (
            "per comment",
            Arc::new(
                PerComment::builder(&t.db)
                    .create_discussions_on_post(true)
                    .build()
                    .unwrap(),
            ),
            Arc::new(PerComment::new(&t.db)),
        ),
        (
            "embedded",
            Arc::new(
                Embedded::builder(&t.db)
                    .create_discussions_on_post(true)
                    .build()
                    .unwrap(),
            ),
            Arc::new(Embedded::new(&t.db)),
        ),
        (
            "hybrid",
            Arc::new(
                HybridPages::builder(&t.db)
                    .page_size(3)
                    .create_discussions_on_post(true)
                    .build()
                    .unwrap(),
            ),
            Arc::new(HybridPages::builder(&t.db).page_size(3).build().unwrap()),
        ),
    ];
    for (name, creating, plain) in stores {
        creating.set_up().await.unwrap();
        let error = plain.post("not-created", new("hello")).await.unwrap_err();
        assert!(error.is_not_found(), "{name}: {error}");
        // Nothing written: no comment (or, where counting needs it, no discussion).
        let count = plain.count("not-created").await;
        assert!(
            matches!(count, Ok(0) | Err(Error::NotFound { .. })),
            "{name}: {count:?}"
        );

        let posters: Vec<_> = (0..6)
            .map(|i| {
                let store = creating.clone();
                tokio::spawn(async move { store.post("fresh", new(&format!("c{i}"))).await })
            })
            .collect();
        for poster in posters {
            poster
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert_eq!(creating.count("fresh").await.unwrap(), 6, "{name}");
        let page = plain
            .chronological("fresh", Order::OldestFirst, PageRequest::first(10))
            .await
            .unwrap();
        assert_eq!(page.items.len(), 6, "{name}");
        // Created once: the plain store posts to it now, and creating it again changes nothing.
        plain.post("fresh", new("c6")).await.unwrap();
        plain.create_discussion("fresh").await.unwrap();
        assert_eq!(plain.count("fresh").await.unwrap(), 7, "{name}");
        // A keyed first post to another new discussion, repeated: one comment.
        let keyed = new("once").with_key("k1");
        let first = creating.post("fresh-keyed", keyed.clone()).await.unwrap();
        let again = creating.post("fresh-keyed", keyed).await.unwrap();
        assert_eq!(first.link, again.link, "{name}");
        assert_eq!(creating.count("fresh-keyed").await.unwrap(), 1, "{name}");
    }
}
