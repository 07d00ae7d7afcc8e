//! Conformance checks every [`CommentStore`] must pass, run against the real server by
//! `tests/comments.rs` for each strategy. Checks of threading run where the strategy declares it
//! ([`CommentStore::threaded`]) and assert its absence elsewhere.
//!
//! Each check takes a store over a fresh database and panics with a message on failure.

use super::SetUp;
use mongo_social::error::Invalid;
use std::collections::HashSet;
use std::sync::Arc;

use crate::CommandCounter;
use mongo_social::comments::{
    Author, Comment, CommentStore, Deletion, NewComment, Order, Strategy, ThreadedComments,
};
use mongo_social::test_support::discussion_cursor;
use mongo_social::{error::Entity, Cursor, Error, Page, PageRequest};

/// The discussion most checks use.
pub const DISCUSSION: &str = "article-1";

fn author(n: usize) -> Author {
    Author::new(format!("user{n}"), format!("User {n}"))
}

fn new(text: &str) -> NewComment {
    NewComment::new(author(text.len()), text)
}

fn texts(comments: &[Comment]) -> Vec<String> {
    comments.iter().map(|c| c.text.clone()).collect()
}

/// Registers [`DISCUSSION`].
pub async fn create(store: &dyn CommentStore) {
    store
        .create_discussion(DISCUSSION)
        .await
        .expect("create discussion");
}

/// Posts top-level comments `c0..c{n}` in order and returns them.
pub async fn post_many(store: &dyn CommentStore, n: usize) -> Vec<Comment> {
    let mut posted = Vec::with_capacity(n);
    for i in 0..n {
        posted.push(
            store
                .post(DISCUSSION, new(&format!("c{i}")))
                .await
                .expect("post"),
        );
    }
    posted
}

/// Every page of the chronological view, `limit` at a time, checking each page's size.
pub async fn read_chronological(
    store: &dyn CommentStore,
    order: Order,
    limit: usize,
) -> Vec<Comment> {
    read_all(limit, |page| async move {
        store.chronological(DISCUSSION, order, page).await
    })
    .await
}

/// Every page of the threaded view, `limit` at a time.
pub async fn read_threaded(
    threads: &dyn ThreadedComments,
    order: Order,
    limit: usize,
) -> Vec<Comment> {
    read_all(limit, |page| async move {
        threads.thread_page(DISCUSSION, order, page).await
    })
    .await
}

/// Every page of the sub-thread at `link`, `limit` at a time.
pub async fn read_sub_thread(
    threads: &dyn ThreadedComments,
    link: &str,
    limit: usize,
) -> Vec<Comment> {
    read_all(limit, |page| async move {
        threads.sub_thread(DISCUSSION, link, page).await
    })
    .await
}

async fn read_all<F, Fut>(limit: usize, read: F) -> Vec<Comment>
where
    F: Fn(PageRequest) -> Fut,
    Fut: std::future::Future<Output = mongo_social::Result<Page<Comment>>>,
{
    let mut all = Vec::new();
    let mut after: Option<Cursor> = None;
    for _ in 0..10_000 {
        let request = PageRequest {
            limit,
            after: after.clone(),
        };
        let page = read(request).await.expect("read a page");
        assert!(page.items.len() <= limit, "page larger than its limit");
        let last = page.next.is_none();
        if !last {
            assert_eq!(page.items.len(), limit, "a page before the last is full");
        }
        all.extend(page.items);
        if last {
            return all;
        }
        after = page.next;
    }
    panic!("pagination did not end");
}

/// Chronological view: posting order oldest first, its reverse newest first.
pub async fn chronological_order(store: &dyn CommentStore) {
    create(store).await;
    let posted = post_many(store, 7).await;
    let expected = texts(&posted);
    let page = store
        .chronological(DISCUSSION, Order::OldestFirst, PageRequest::first(100))
        .await
        .unwrap();
    assert_eq!(texts(&page.items), expected);
    assert_eq!(page.items, posted, "pages return comments as posted");
    assert!(page.next.is_none());
    let newest = store
        .chronological(DISCUSSION, Order::NewestFirst, PageRequest::first(100))
        .await
        .unwrap();
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(texts(&newest.items), reversed);
    assert!(posted
        .iter()
        .all(|c| c.depth == 0 && c.parent.is_none() && !c.deleted));
}

/// Keyset pages of every size, both orders: no gaps, no repeats, nothing extra.
pub async fn complete_pagination(store: &dyn CommentStore) {
    create(store).await;
    let expected = texts(&post_many(store, 23).await);
    let mut reversed = expected.clone();
    reversed.reverse();
    for limit in [1, 2, 3, 4, 5, 7, 22, 23, 24, 1000] {
        let oldest = read_chronological(store, Order::OldestFirst, limit).await;
        assert_eq!(texts(&oldest), expected, "oldest first, pages of {limit}");
        let newest = read_chronological(store, Order::NewestFirst, limit).await;
        assert_eq!(texts(&newest), reversed, "newest first, pages of {limit}");
    }
}

/// Comments posted while a reader pages through neither repeat nor shift what follows.
pub async fn pagination_while_posting(store: &dyn CommentStore) {
    create(store).await;
    let expected = texts(&post_many(store, 9).await);
    let mut seen = Vec::new();
    let mut request = PageRequest::first(4);
    loop {
        let page = store
            .chronological(DISCUSSION, Order::OldestFirst, request)
            .await
            .unwrap();
        seen.extend(texts(&page.items));
        store
            .post(DISCUSSION, new(&format!("late{}", seen.len())))
            .await
            .unwrap();
        match page.next {
            Some(next) => request = PageRequest::after(4, next),
            None => break,
        }
    }
    assert_eq!(&seen[..9], &expected[..], "the first comments in order");
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no repeats: {seen:?}");
    assert!(seen[9..].iter().all(|t| t.starts_with("late")));
}

/// The threaded tree most threading checks use:
/// ```text
/// a
///   a1
///     a1x
///   a2
/// b
///   b1
/// c
/// ```
/// Returns the comments in oldest-first threaded order.
pub async fn build_tree(threads: &dyn ThreadedComments) -> Vec<Comment> {
    let a = threads.post(DISCUSSION, new("a")).await.unwrap();
    let b = threads.post(DISCUSSION, new("b")).await.unwrap();
    let a1 = threads.reply(DISCUSSION, &a.link, new("a1")).await.unwrap();
    let b1 = threads.reply(DISCUSSION, &b.link, new("b1")).await.unwrap();
    let c = threads.post(DISCUSSION, new("c")).await.unwrap();
    let a2 = threads.reply(DISCUSSION, &a.link, new("a2")).await.unwrap();
    let a1x = threads
        .reply(DISCUSSION, &a1.link, new("a1x"))
        .await
        .unwrap();
    vec![a, a1, a1x, a2, b, b1, c]
}

/// Threading, where the strategy has it: depth-first order in both orders, parents and depths,
/// complete threaded pagination; and no threading where the strategy says so.
pub async fn threaded_order(store: &dyn CommentStore) {
    let Some(threads) = store.threaded() else {
        assert!(
            !store.features().threading,
            "threaded() agrees with features()"
        );
        return;
    };
    assert!(store.features().threading);
    create(store).await;
    let tree = build_tree(threads).await;
    assert_eq!(
        tree.iter().map(|c| c.depth).collect::<Vec<_>>(),
        [0, 1, 2, 1, 0, 1, 0]
    );
    assert_eq!(tree[1].parent.as_deref(), Some(tree[0].link.as_str()));
    assert_eq!(tree[2].parent.as_deref(), Some(tree[1].link.as_str()));
    for limit in [1, 2, 3, 6, 7, 100] {
        let oldest = read_threaded(threads, Order::OldestFirst, limit).await;
        assert_eq!(
            texts(&oldest),
            ["a", "a1", "a1x", "a2", "b", "b1", "c"],
            "pages of {limit}"
        );
        assert_eq!(oldest, tree, "threaded pages return comments as posted");
        let newest = read_threaded(threads, Order::NewestFirst, limit).await;
        assert_eq!(
            texts(&newest),
            ["c", "b", "b1", "a", "a1", "a1x", "a2"],
            "pages of {limit}"
        );
    }
    // The chronological view lists replies too, by posting time.
    let chronological = read_chronological(store, Order::OldestFirst, 3).await;
    assert_eq!(
        texts(&chronological),
        ["a", "b", "a1", "b1", "c", "a2", "a1x"]
    );
}

/// Sub-threads: a comment and all its descendants in threaded order, paged; a leaf alone.
pub async fn sub_threads(store: &dyn CommentStore) {
    let Some(threads) = store.threaded() else {
        return;
    };
    create(store).await;
    let tree = build_tree(threads).await;
    for limit in [1, 2, 10] {
        let sub = read_sub_thread(threads, &tree[0].link, limit).await;
        assert_eq!(texts(&sub), ["a", "a1", "a1x", "a2"], "pages of {limit}");
    }
    assert_eq!(
        texts(&read_sub_thread(threads, &tree[1].link, 10).await),
        ["a1", "a1x"]
    );
    assert_eq!(
        texts(&read_sub_thread(threads, &tree[6].link, 10).await),
        ["c"]
    );
    // A cursor from one sub-thread does not page another.
    let first = threads
        .sub_thread(DISCUSSION, &tree[0].link, PageRequest::first(1))
        .await
        .unwrap();
    let foreign = threads
        .sub_thread(
            DISCUSSION,
            &tree[4].link,
            PageRequest::after(1, first.next.unwrap()),
        )
        .await;
    assert!(
        matches!(
            foreign,
            Err(Error::InvalidInput {
                reason: Invalid::Cursor { .. },
                ..
            })
        ) || foreign.is_ok_and(|p| p.items.iter().all(|c| c.text.starts_with('b'))),
        "another sub-thread's cursor is refused or stays in this sub-thread"
    );
}

/// Replies ten levels deep: each at its depth, linked to its parent, in order.
pub async fn deep_replies(store: &dyn CommentStore) {
    let Some(threads) = store.threaded() else {
        return;
    };
    create(store).await;
    let mut chain = vec![threads.post(DISCUSSION, new("d0")).await.unwrap()];
    for depth in 1..=10 {
        let parent = chain.last().unwrap().link.clone();
        let reply = threads
            .reply(DISCUSSION, &parent, new(&format!("d{depth}")))
            .await
            .unwrap();
        assert_eq!(reply.depth, depth);
        assert_eq!(reply.parent.as_deref(), Some(parent.as_str()));
        chain.push(reply);
    }
    let thread = read_threaded(threads, Order::OldestFirst, 4).await;
    assert_eq!(thread, chain);
    let deepest = store.get(DISCUSSION, &chain[10].link).await.unwrap();
    assert_eq!(deepest, chain[10]);
    let sub = read_sub_thread(threads, &chain[5].link, 2).await;
    assert_eq!(sub, chain[5..]);
}

/// Direct links: every comment found by its link; malformed and unknown links refused.
pub async fn direct_links(store: &dyn CommentStore) {
    create(store).await;
    let mut posted = post_many(store, 5).await;
    if let Some(threads) = store.threaded() {
        posted.push(
            threads
                .reply(DISCUSSION, &posted[2].link, new("reply"))
                .await
                .unwrap(),
        );
    }
    for comment in &posted {
        assert_eq!(
            &store.get(DISCUSSION, &comment.link).await.unwrap(),
            comment
        );
    }
    let links: HashSet<&String> = posted.iter().map(|c| &c.link).collect();
    assert_eq!(links.len(), posted.len(), "links are unique");
    for bad in ["", "not a link!", "../etc", "1..2"] {
        let error = store.get(DISCUSSION, bad).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Link { .. },
                    ..
                }
            ),
            "{bad}: {error}"
        );
    }
    // A well-formed link no comment has: change the last character of a real one.
    let mut unknown = posted[0].link.clone();
    let last = unknown.pop().unwrap();
    unknown.push(if last == '9' { '8' } else { '9' });
    if store.strategy() == Strategy::Embedded {
        unknown = "999".to_owned(); // a position path: a position past the end
    }
    let error = store.get(DISCUSSION, &unknown).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::Comment,
                ..
            }
        ),
        "{unknown}: {error}"
    );
    let error = store
        .get("no-such-discussion", &posted[0].link)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
}

/// Edits keep when and that they happened; deletes remove leaves (where the strategy does) and
/// tombstone the rest; counts follow.
pub async fn edits_and_deletes(store: &dyn CommentStore) {
    create(store).await;
    let posted = post_many(store, 4).await;
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 4);

    let edited = store
        .edit(DISCUSSION, &posted[1].link, "c1, edited")
        .await
        .unwrap();
    assert_eq!(edited.text, "c1, edited");
    assert!(edited.edited.is_some_and(|at| at >= posted[1].posted));
    assert_eq!(edited.posted, posted[1].posted, "the posting time stays");
    assert_eq!(
        store.get(DISCUSSION, &posted[1].link).await.unwrap(),
        edited
    );

    let leaf = store.delete(DISCUSSION, &posted[0].link).await.unwrap();
    if store.features().removes_leaves {
        assert_eq!(leaf, Deletion::Removed);
        let error = store.get(DISCUSSION, &posted[0].link).await.unwrap_err();
        assert!(matches!(error, Error::NotFound { .. }));
    } else {
        assert_eq!(leaf, Deletion::Tombstoned);
        let tombstone = store.get(DISCUSSION, &posted[0].link).await.unwrap();
        assert!(tombstone.deleted && tombstone.text.is_empty());
        assert_eq!(
            store.delete(DISCUSSION, &posted[0].link).await.unwrap(),
            Deletion::Tombstoned
        );
        let error = store
            .edit(DISCUSSION, &posted[0].link, "back")
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::NotFound {
                    what: mongo_social::error::Entity::DeletedComment,
                    ..
                }
            ),
            "{error}"
        );
    }
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 3);

    if let Some(threads) = store.threaded() {
        let reply = threads
            .reply(DISCUSSION, &posted[2].link, new("r"))
            .await
            .unwrap();
        assert_eq!(store.count(DISCUSSION).await.unwrap(), 4);
        assert_eq!(
            store.delete(DISCUSSION, &posted[2].link).await.unwrap(),
            Deletion::Tombstoned
        );
        let tombstone = store.get(DISCUSSION, &posted[2].link).await.unwrap();
        assert!(tombstone.deleted && tombstone.text.is_empty());
        assert_eq!(store.count(DISCUSSION).await.unwrap(), 3);
        let thread = read_threaded(threads, Order::OldestFirst, 10).await;
        let position = thread
            .iter()
            .position(|c| c.link == posted[2].link)
            .unwrap();
        assert_eq!(
            thread[position + 1],
            reply,
            "the reply keeps its place under the tombstone"
        );
        let error = store
            .edit(DISCUSSION, &posted[2].link, "back")
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::NotFound {
                    what: mongo_social::error::Entity::DeletedComment,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(
            store.delete(DISCUSSION, &posted[2].link).await.unwrap(),
            Deletion::Tombstoned
        );
        assert_eq!(
            store.count(DISCUSSION).await.unwrap(),
            3,
            "deleting twice counts once"
        );
    }
    let visible: Vec<String> = read_chronological(store, Order::OldestFirst, 2)
        .await
        .into_iter()
        .filter(|c| !c.deleted)
        .map(|c| c.text)
        .collect();
    assert_eq!(visible.len() as u64, store.count(DISCUSSION).await.unwrap());
    assert!(visible.contains(&"c1, edited".to_owned()));
}

/// Many posters at once, some comments deleted meanwhile: nothing lost or repeated, each
/// poster's comments in its order, and the count exact.
pub async fn concurrent_posters(store: Arc<dyn CommentStore>, posters: usize, each: usize) {
    create(&*store).await;
    let doomed = post_many(&*store, posters).await;
    let mut tasks = Vec::new();
    for (poster, doomed) in doomed.iter().enumerate() {
        let poster_store = store.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..each {
                poster_store
                    .post(
                        DISCUSSION,
                        NewComment::new(author(poster), format!("p{poster}-{i}")),
                    )
                    .await
                    .expect("concurrent post");
            }
        }));
        let deleter_store = store.clone();
        let link = doomed.link.clone();
        tasks.push(tokio::spawn(async move {
            deleter_store
                .delete(DISCUSSION, &link)
                .await
                .expect("concurrent delete");
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let all = read_chronological(&*store, Order::OldestFirst, 37).await;
    let live: Vec<&Comment> = all.iter().filter(|c| !c.deleted).collect();
    assert_eq!(live.len(), posters * each, "every post, once");
    let unique: HashSet<&str> = live.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(unique.len(), posters * each, "no duplicates");
    for poster in 0..posters {
        let mine: Vec<&str> = live
            .iter()
            .filter(|c| c.author.id == format!("user{poster}"))
            .map(|c| c.text.as_str())
            .collect();
        let expected: Vec<String> = (0..each).map(|i| format!("p{poster}-{i}")).collect();
        assert_eq!(mine, expected, "poster {poster}'s comments in its order");
    }
    assert!(all.iter().filter(|c| c.deleted).all(|c| c.text.is_empty()));
    assert_eq!(
        store.count(DISCUSSION).await.unwrap(),
        (posters * each) as u64
    );
}

/// Concurrent posters, and where the strategy threads, concurrent replies to one parent: a
/// comment's place and its `posted` time agree in every view. The chronological view is oldest
/// first by `posted`; in the threaded view the top-level comments, and the replies to any one
/// comment, come in `posted` order. (A strategy that stamps a comment before it knows its place,
/// then loses a race for that place, breaks this.)
pub async fn posted_agrees_with_position(
    store: Arc<dyn CommentStore>,
    posters: usize,
    each: usize,
) {
    create(&*store).await;
    let parent = store.post(DISCUSSION, new("parent")).await.expect("post");
    let mut tasks = Vec::new();
    for poster in 0..posters {
        let store = store.clone();
        let parent = parent.link.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..each {
                let text = format!("p{poster}-{i}");
                store
                    .post(DISCUSSION, NewComment::new(author(poster), text))
                    .await
                    .expect("concurrent post");
                if let Some(threads) = store.threaded() {
                    let text = format!("r{poster}-{i}");
                    threads
                        .reply(DISCUSSION, &parent, NewComment::new(author(poster), text))
                        .await
                        .expect("concurrent reply");
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let replies = if store.threaded().is_some() { each } else { 0 };
    let total = 1 + posters * (each + replies);
    for order in [Order::OldestFirst, Order::NewestFirst] {
        let mut read = read_chronological(&*store, order, 9).await;
        assert_eq!(read.len(), total, "chronological, {order:?}");
        if order == Order::NewestFirst {
            read.reverse();
        }
        for pair in read.windows(2) {
            assert!(
                pair[0].posted <= pair[1].posted,
                "chronological, {order:?}: {} (posted {}) before {} (posted {})",
                pair[0].text,
                pair[0].posted,
                pair[1].text,
                pair[1].posted
            );
        }
    }
    let Some(threads) = store.threaded() else {
        return;
    };
    let thread = read_threaded(threads, Order::OldestFirst, 9).await;
    assert_eq!(thread.len(), total, "threaded");
    let mut last: std::collections::HashMap<Option<String>, &Comment> = Default::default();
    for comment in &thread {
        if let Some(previous) = last.insert(comment.parent.clone(), comment) {
            assert!(
                previous.posted <= comment.posted,
                "threaded: sibling {} (posted {}) before {} (posted {})",
                previous.text,
                previous.posted,
                comment.text,
                comment.posted
            );
        }
    }
}

/// Bad input: a typed error each, and nothing written.
pub async fn bad_input(
    store: &dyn CommentStore,
    documents: impl Fn() -> futures::future::BoxFuture<'static, u64>,
) {
    create(store).await;
    let posted = post_many(store, 2).await;
    let before = documents().await;

    let error = store
        .post("no-such-discussion", new("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::Discussion,
                ..
            }
        ),
        "{error}"
    );
    let error = store
        .chronological(
            "no-such-discussion",
            Order::OldestFirst,
            PageRequest::first(5),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                what: Entity::Discussion,
                ..
            }
        ),
        "{error}"
    );
    let error = store.post(DISCUSSION, new("   ")).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Blank { what: "text" },
                ..
            }
        ),
        "{error}"
    );
    // Empty and whitespace-only are the same error, `Blank`, in every module: naming the role
    // of a user id, the field of other text.
    for blank in ["", " ", "\t "] {
        let error = store.post(blank, new("x")).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank {
                        what: "discussion id"
                    },
                    ..
                }
            ),
            "{blank:?}: {error}"
        );
        let error = store.create_discussion(blank).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank {
                        what: "discussion id"
                    },
                    ..
                }
            ),
            "{blank:?}: {error}"
        );
        let error = store
            .post(
                DISCUSSION,
                NewComment::new(Author::new(blank, "Nobody"), "x"),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { what: "author" },
                    ..
                }
            ),
            "{blank:?}: {error}"
        );
        let error = store.post(DISCUSSION, new(blank)).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { what: "text" },
                    ..
                }
            ),
            "{blank:?}: {error}"
        );
    }
    let error = store
        .post(DISCUSSION, new(&"x".repeat(70 * 1024)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::TooLarge {
                    what: "comment",
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
    let error = store
        .edit(DISCUSSION, &posted[0].link, "")
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Blank { what: "text" },
                ..
            }
        ),
        "{error}"
    );
    let error = store
        .edit(DISCUSSION, &posted[0].link, &"y".repeat(70 * 1024))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::TooLarge {
                    what: "comment",
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
    let error = store.delete(DISCUSSION, "bad link").await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Link { .. },
                ..
            }
        ),
        "{error}"
    );

    if let Some(threads) = store.threaded() {
        let error = threads
            .reply(DISCUSSION, "bad/link!", new("x"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Link { .. },
                    ..
                }
            ),
            "{error}"
        );
        let mut unknown = posted[0].link.clone();
        unknown.push_str(if store.strategy() == Strategy::Embedded {
            ".7"
        } else {
            "/0123abcd"
        });
        let error = threads
            .reply(DISCUSSION, &unknown, new("x"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::NotFound {
                    what: Entity::ParentComment,
                    ..
                }
            ),
            "{unknown}: {error}"
        );
        let error = threads
            .reply(DISCUSSION, &posted[0].link, new(""))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { what: "text" },
                    ..
                }
            ),
            "{error}"
        );
    }

    for bad in ["", "garbage", "p.c.o.", "q.c.o.1"] {
        assert!(bad.parse::<Cursor>().is_err(), "{bad}");
    }
    // A well-formed cursor of another view, order or strategy is refused.
    let page = store
        .chronological(DISCUSSION, Order::OldestFirst, PageRequest::first(1))
        .await
        .unwrap();
    let cursor = page.next.unwrap();
    let error = store
        .chronological(
            DISCUSSION,
            Order::NewestFirst,
            PageRequest::after(1, cursor.clone()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                reason: Invalid::Cursor { .. },
                ..
            }
        ),
        "{error}"
    );
    // Whole cursors (tag: `c`, strategy, view, order) whose position no store made.
    for (tag, position) in [
        ("cpco", &["x"][..]),
        ("ceco", &["x:y"]),
        ("chco", &["-1"]),
        ("cpto", &["zz"]),
        ("ceto", &["01"]),
        ("chto", &["1"]),
    ] {
        let cursor = discussion_cursor(tag, DISCUSSION, position);
        let error = store
            .chronological(
                DISCUSSION,
                Order::OldestFirst,
                PageRequest::after(1, cursor),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Cursor { .. },
                    ..
                }
            ),
            "{tag} {position:?}: {error}"
        );
    }
    for limit in [0, PageRequest::MAX_LIMIT + 1] {
        let error = store
            .chronological(DISCUSSION, Order::OldestFirst, PageRequest::first(limit))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::PageLimit { .. },
                    ..
                }
            ),
            "{error}"
        );
    }

    assert_eq!(documents().await, before, "nothing was written");
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 2);
    assert_eq!(
        texts(&read_chronological(store, Order::OldestFirst, 10).await),
        ["c0", "c1"]
    );
}

/// Setup is idempotent: `first` creates its indexes and takes comments; `second`, a new store
/// on the same database (the application's next start), creates its indexes again, reads what
/// was written and takes more.
pub async fn reopen(first: &dyn CommentStore, second: &dyn CommentStore) {
    first.set_up().await.expect("create indexes");
    create(first).await;
    let mut posted = post_many(first, 12).await;
    second
        .set_up()
        .await
        .expect("create indexes on the next start");
    second
        .set_up()
        .await
        .expect("create indexes again, same store");
    create(second).await;
    posted.push(second.post(DISCUSSION, new("after")).await.expect("post"));
    assert_eq!(
        read_chronological(second, Order::OldestFirst, 5).await,
        posted,
        "what was written, after a reopen"
    );
    assert_eq!(second.count(DISCUSSION).await.unwrap(), 13);
}

/// A store used before [`CommentStore::create_indexes`] was called still keeps every promise: a
/// strategy whose correctness depends on an index creates it before its first write (once per
/// store).
pub async fn without_create_indexes(store: &dyn CommentStore) {
    create(store).await;
    let posted = post_many(store, 23).await;
    let mut reversed = posted.clone();
    reversed.reverse();
    for limit in [4, 10] {
        assert_eq!(
            read_chronological(store, Order::OldestFirst, limit).await,
            posted,
            "oldest first, pages of {limit}"
        );
        assert_eq!(
            read_chronological(store, Order::NewestFirst, limit).await,
            reversed,
            "newest first, pages of {limit}"
        );
    }
    assert_eq!(store.count(DISCUSSION).await.unwrap(), 23);
    for comment in &posted {
        assert_eq!(
            &store.get(DISCUSSION, &comment.link).await.unwrap(),
            comment
        );
    }
}

/// Commands per operation, as the strategy's docs state: reading a page is one `find`.
/// `post` lists the commands of a top-level post; where `locked` (the strategy locks posts on
/// servers without atomic updates, and this is one), a lock `insert` comes first and a lock
/// `delete` last.
pub async fn command_counts(
    store: &dyn CommentStore,
    commands: &CommandCounter,
    locked: bool,
    post: &[&str],
) {
    create(store).await;
    post_many(store, 16).await; // also detects the server's capabilities
    commands.reset();
    store.post(DISCUSSION, new("counted")).await.unwrap();
    let mut expected: Vec<&str> = post.to_vec();
    if locked {
        expected.insert(0, "insert");
        expected.push("delete");
    }
    assert_eq!(commands.names(), expected, "a post");
    for order in [Order::OldestFirst, Order::NewestFirst] {
        let mut request = PageRequest::first(5);
        for _ in 0..3 {
            commands.reset();
            let page = store
                .chronological(DISCUSSION, order, request)
                .await
                .unwrap();
            assert_eq!(commands.names(), ["find"], "a chronological page");
            request = PageRequest::after(5, page.next.unwrap());
        }
        if let Some(threads) = store.threaded() {
            commands.reset();
            threads
                .thread_page(DISCUSSION, order, PageRequest::first(5))
                .await
                .unwrap();
            assert_eq!(commands.names(), ["find"], "a threaded page");
        }
    }
    let link = store
        .chronological(DISCUSSION, Order::OldestFirst, PageRequest::first(1))
        .await
        .unwrap()
        .items[0]
        .link
        .clone();
    commands.reset();
    store.get(DISCUSSION, &link).await.unwrap();
    assert_eq!(commands.names(), ["find"], "a direct link");
}

/// Posts and (where the strategy threads) replies from a few concurrent tasks through a client on
/// `proxy` while it loses replies, then cuts connections and refuses new ones for 3 seconds
/// ([`FaultProxy::outage_during`](crate::fault_proxy::FaultProxy::outage_during)).
/// `store` and `impatient` are one strategy's collections through that client; half the tasks
/// use `impatient`, whose retry budget ([`impatient_retry`](crate::impatient_retry)) is
/// shorter than the outage.
///
/// Afterwards: every comment whose write returned `Ok` is stored exactly once, at the link it
/// returned; one that failed (only with a transient error) is stored at most once; `count` is
/// the number of stored comments; and some impatient write did fail, so that branch was checked.
pub async fn survives_outage(
    store: Arc<dyn CommentStore>,
    impatient: Arc<dyn CommentStore>,
    proxy: &crate::fault_proxy::FaultProxy,
) {
    const TASKS: usize = 4;
    const PER_TASK: usize = 25;
    create(&*store).await;
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = if task % 2 == 0 { &store } else { &impatient }.clone();
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let mut parent: Option<String> = None;
            for seq in 0..PER_TASK {
                let text = format!("t{task}-{seq}");
                let comment = NewComment::new(author(task), &text);
                let outcome = match (store.threaded(), &parent) {
                    (Some(threads), Some(link)) if seq % 3 == 2 => {
                        threads.reply(DISCUSSION, link, comment).await
                    }
                    _ => store.post(DISCUSSION, comment).await,
                };
                match &outcome {
                    Ok(comment) => parent = Some(comment.link.clone()),
                    Err(error) => assert!(error.is_retryable(), "only transient failures: {error}"),
                }
                outcomes.push((text, outcome.ok()));
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            outcomes
        }));
    }
    let outcomes: Vec<_> = proxy
        .outage_during(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();

    let stored = read_chronological(&*store, Order::OldestFirst, 16).await;
    assert_eq!(
        store.count(DISCUSSION).await.expect("count"),
        stored.len() as u64,
        "the count is what the discussion holds"
    );
    let mut failed = 0;
    for (text, outcome) in &outcomes {
        let copies = stored.iter().filter(|c| c.text == *text).count();
        match outcome {
            Some(comment) => {
                assert_eq!(copies, 1, "{text}: stored once");
                let linked = store.get(DISCUSSION, &comment.link).await.expect("get");
                assert_eq!(linked.text, *text, "{text}: its link leads to it");
                assert_eq!(linked.posted, comment.posted, "{text}: stamped as returned");
            }
            None => {
                failed += 1;
                assert!(copies <= 1, "{text}: never twice");
            }
        }
    }
    for comment in &stored {
        assert!(
            outcomes.iter().any(|(text, _)| *text == comment.text),
            "{}: stored but never written",
            comment.text
        );
    }
    crate::note(&format!(
        "comments survives_outage: {} writes, {failed} failed; proxy lost {} replies, accepted \
         {} and refused {} connections",
        outcomes.len(),
        proxy.replies_lost(),
        proxy.connections_accepted(),
        proxy.connections_refused()
    ));
    assert!(
        failed > 0
            || proxy
                .fails_during_outage(
                    std::time::Duration::from_secs(2),
                    impatient.count(DISCUSSION)
                )
                .await,
        "an impatient writer gave up during the outage"
    );
}
