//! Conformance checks of votes and ranked pages
//! ([`VotedComments`](mongo_social::comments::VotedComments)) every [`CommentStore`] must pass, run
//! against the real server by `tests/comments.rs` for each strategy, beside
//! [`super::comments_suite`]. Checks of replies run where the strategy threads and assert their
//! absence elsewhere.
//!
//! Each check takes a store over a fresh database and panics with a message on failure.

use mongo_social::error::Invalid;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::comments_suite::{create, post_many, DISCUSSION};
use crate::CommandCounter;
use mongo_social::comments::{
    Comment, CommentStore, Deletion, NewComment, Sort, Thread, ThreadedComments, Vote, Votes,
};
use mongo_social::{error::Entity, Cursor, Error, Page, PageRequest};

fn new(text: &str) -> NewComment {
    NewComment::new(
        mongo_social::comments::Author::new("poster", "Poster"),
        text,
    )
}

fn texts(comments: &[Comment]) -> Vec<String> {
    comments.iter().map(|c| c.text.clone()).collect()
}

/// The comment at `link`'s votes, as [`CommentStore::get`] reads them.
async fn votes_of(store: &dyn CommentStore, link: &str) -> Votes {
    store.get(DISCUSSION, link).await.expect("get").votes
}

/// `ups` users vote the comment at `link` up and `downs` others down (users `<prefix>0`, ...).
pub async fn cast(store: &dyn CommentStore, link: &str, prefix: &str, ups: usize, downs: usize) {
    for i in 0..ups + downs {
        let vote = if i < ups { Vote::Up } else { Vote::Down };
        let before = store
            .vote(DISCUSSION, link, &format!("{prefix}{i}"), vote)
            .await
            .expect("vote");
        assert_eq!(before, None, "a first vote replaces nothing");
    }
}

/// Every page of the ranked level under `parent` by `sort`, `limit` at a time, checking each
/// page's size and order (highest key first).
pub async fn read_ranked(
    store: &dyn CommentStore,
    parent: Option<&str>,
    sort: Sort,
    limit: usize,
) -> Vec<Comment> {
    let mut all = Vec::new();
    let mut after: Option<Cursor> = None;
    for _ in 0..10_000 {
        let request = PageRequest {
            limit,
            after: after.take(),
        };
        let page = store
            .ranked(DISCUSSION, parent, sort, request)
            .await
            .expect("a ranked page");
        check_page_order(&page, sort, limit);
        let last = page.next.is_none();
        all.extend(page.items);
        if last {
            return all;
        }
        after = page.next;
    }
    panic!("ranked pagination did not end");
}

fn check_page_order(page: &Page<Comment>, sort: Sort, limit: usize) {
    assert!(page.items.len() <= limit, "page larger than its limit");
    if page.next.is_some() {
        assert_eq!(page.items.len(), limit, "a page before the last is full");
    }
    for pair in page.items.windows(2) {
        let key = |c: &Comment| sort.key(c.votes, c.posted);
        assert!(
            key(&pair[0]) >= key(&pair[1]),
            "{sort}: {} ({:?}) before {} ({:?})",
            pair[0].text,
            pair[0].votes,
            pair[1].text,
            pair[1].votes
        );
    }
}

/// Votes up and down, changed and taken back, one per user per comment; counts on every read
/// (direct link, chronological and ranked pages); a tombstone refuses votes and keeps its
/// retractions; a comment removed outright takes its votes with it.
pub async fn votes_change_and_retract(store: &dyn CommentStore) {
    create(store).await;
    let posted = post_many(store, 3).await;
    assert!(posted.iter().all(|c| c.votes == Votes::default()));
    let link = posted[0].link.as_str();

    assert_eq!(
        store.vote(DISCUSSION, link, "u1", Vote::Up).await.unwrap(),
        None
    );
    assert_eq!(votes_of(store, link).await, Votes { ups: 1, downs: 0 });
    assert_eq!(
        store.vote_of(DISCUSSION, link, "u1").await.unwrap(),
        Some(Vote::Up)
    );
    // The same vote again changes nothing.
    assert_eq!(
        store.vote(DISCUSSION, link, "u1", Vote::Up).await.unwrap(),
        Some(Vote::Up)
    );
    assert_eq!(votes_of(store, link).await, Votes { ups: 1, downs: 0 });
    // Changed: up to down.
    assert_eq!(
        store
            .vote(DISCUSSION, link, "u1", Vote::Down)
            .await
            .unwrap(),
        Some(Vote::Up)
    );
    assert_eq!(votes_of(store, link).await, Votes { ups: 0, downs: 1 });
    assert_eq!(
        store.vote_of(DISCUSSION, link, "u1").await.unwrap(),
        Some(Vote::Down)
    );
    // Taken back, then again (nothing to take).
    assert_eq!(
        store.retract_vote(DISCUSSION, link, "u1").await.unwrap(),
        Some(Vote::Down)
    );
    assert_eq!(votes_of(store, link).await, Votes::default());
    assert_eq!(store.vote_of(DISCUSSION, link, "u1").await.unwrap(), None);
    assert_eq!(
        store.retract_vote(DISCUSSION, link, "u1").await.unwrap(),
        None
    );

    // Several users, several comments: each count its own.
    for (user, vote) in [("u1", Vote::Up), ("u2", Vote::Up), ("u3", Vote::Down)] {
        store.vote(DISCUSSION, link, user, vote).await.unwrap();
    }
    store
        .vote(DISCUSSION, &posted[1].link, "u1", Vote::Down)
        .await
        .unwrap();
    assert_eq!(votes_of(store, link).await, Votes { ups: 2, downs: 1 });
    assert_eq!(
        votes_of(store, &posted[1].link).await,
        Votes { ups: 0, downs: 1 }
    );
    assert_eq!(votes_of(store, &posted[2].link).await, Votes::default());
    let chronological = store
        .chronological(
            DISCUSSION,
            mongo_social::comments::Order::OldestFirst,
            PageRequest::first(10),
        )
        .await
        .unwrap();
    let counts: Vec<Votes> = chronological.items.iter().map(|c| c.votes).collect();
    assert_eq!(
        counts,
        [
            Votes { ups: 2, downs: 1 },
            Votes { ups: 0, downs: 1 },
            Votes::default()
        ],
        "pages carry the counts"
    );
    let top = read_ranked(store, None, Sort::Top, 10).await;
    assert_eq!(texts(&top), ["c0", "c2", "c1"]);

    if let Some(threads) = store.threaded() {
        let reply = threads
            .reply(DISCUSSION, &posted[2].link, new("r"))
            .await
            .unwrap();
        store
            .vote(DISCUSSION, &reply.link, "u9", Vote::Up)
            .await
            .unwrap();
        assert_eq!(
            votes_of(store, &reply.link).await,
            Votes { ups: 1, downs: 0 }
        );
        let replies = read_ranked(store, Some(&posted[2].link), Sort::Best, 10).await;
        assert_eq!(texts(&replies), ["r"]);
        assert_eq!(replies[0].votes, Votes { ups: 1, downs: 0 });
        assert_eq!(replies[0].parent.as_deref(), Some(posted[2].link.as_str()));
        assert_eq!(
            votes_of(store, &posted[2].link).await,
            Votes::default(),
            "a reply's votes are its own"
        );
    }

    // A tombstone takes no votes, and keeps the ones it has until they are taken back.
    let deletion = store.delete(DISCUSSION, link).await.unwrap();
    if deletion == Deletion::Tombstoned {
        let error = store
            .vote(DISCUSSION, link, "u4", Vote::Up)
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
            store.retract_vote(DISCUSSION, link, "u3").await.unwrap(),
            Some(Vote::Down)
        );
        assert_eq!(votes_of(store, link).await, Votes { ups: 2, downs: 0 });
    } else {
        // Removed outright, with its votes.
        assert_eq!(store.vote_of(DISCUSSION, link, "u1").await.unwrap(), None);
        let error = store
            .vote(DISCUSSION, link, "u4", Vote::Up)
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::NotFound {
                    what: Entity::Comment,
                    ..
                }
            ),
            "{error}"
        );
    }
    assert_eq!(
        store.settle_votes(DISCUSSION).await.unwrap(),
        0,
        "nothing left marked"
    );
}

/// The hand-made discussion of [`sort_orders`]: top-level comments `p`..`u` (posted in that
/// order) and the replies `p1`..`p3` of `p` where the strategy threads, with these votes:
///
/// | comment | ups | downs | top | best (95 %) | controversy |
/// |---|---|---|---|---|---|
/// | p | 20 | 15 | 5 | 0.409 | 14.4 |
/// | q | 4 | 0 | 4 | 0.510 | 0 |
/// | r | 3 | 3 | 0 | 0.188 | 6 |
/// | s | 0 | 2 | -2 | 0 | 0 |
/// | t | 2 | 0 | 2 | 0.342 | 0 |
/// | u | 2 | 5 | -3 | 0.082 | 2.18 |
/// | p1 | 3 | 0 | 3 | 0.439 | 0 |
/// | p2 | 0 | 2 | -2 | 0 | 0 |
/// | p3 | 1 | 1 | 0 | 0.095 | 2 |
///
/// Returns the link of `p`.
pub async fn build_voted(store: &dyn CommentStore) -> String {
    create(store).await;
    let mut links = HashMap::new();
    for text in ["p", "q", "r", "s", "t", "u"] {
        let comment = store.post(DISCUSSION, new(text)).await.expect("post");
        links.insert(text, comment.link);
    }
    for (text, ups, downs) in [
        ("p", 20, 15),
        ("q", 4, 0),
        ("r", 3, 3),
        ("s", 0, 2),
        ("t", 2, 0),
        ("u", 2, 5),
    ] {
        cast(store, &links[text], "voter", ups, downs).await;
    }
    if let Some(threads) = store.threaded() {
        for (text, ups, downs) in [("p1", 3, 0), ("p2", 0, 2), ("p3", 1, 1)] {
            let reply = threads
                .reply(DISCUSSION, &links["p"], new(text))
                .await
                .expect("reply");
            cast(store, &reply.link, "voter", ups, downs).await;
        }
    }
    links["p"].clone()
}

/// Each sort's order on [`build_voted`]'s discussion, at every page size: the top level, and
/// where the strategy threads, the replies of `p` ranked within it.
pub async fn sort_orders(store: &dyn CommentStore) {
    let p = build_voted(store).await;
    // Posted moments apart, the comments' times weigh nothing in "hot" beside their scores.
    let expected = [
        (
            Sort::Top,
            ["p", "q", "t", "r", "s", "u"],
            ["p1", "p3", "p2"],
        ),
        (
            Sort::Best,
            ["q", "p", "t", "r", "u", "s"],
            ["p1", "p3", "p2"],
        ),
        (
            Sort::Hot,
            ["p", "q", "t", "r", "s", "u"],
            ["p1", "p3", "p2"],
        ),
        // Equal keys (q, s, t: no controversy) in posting order.
        (
            Sort::Controversial,
            ["p", "r", "u", "q", "s", "t"],
            ["p3", "p1", "p2"],
        ),
    ];
    let counts: HashMap<&str, Votes> = [
        ("p", (20, 15)),
        ("q", (4, 0)),
        ("r", (3, 3)),
        ("s", (0, 2)),
        ("t", (2, 0)),
        ("u", (2, 5)),
        ("p1", (3, 0)),
        ("p2", (0, 2)),
        ("p3", (1, 1)),
    ]
    .into_iter()
    .map(|(text, (ups, downs))| (text, Votes { ups, downs }))
    .collect();
    for (sort, top_level, replies) in expected {
        for limit in [1, 2, 4, 5, 6, 100] {
            let ranked = read_ranked(store, None, sort, limit).await;
            assert_eq!(texts(&ranked), top_level, "{sort}, pages of {limit}");
            for comment in &ranked {
                assert_eq!(
                    comment.votes,
                    counts[comment.text.as_str()],
                    "{}",
                    comment.text
                );
            }
            if store.threaded().is_some() {
                let ranked = read_ranked(store, Some(&p), sort, limit).await;
                assert_eq!(texts(&ranked), replies, "{sort} replies, pages of {limit}");
                assert!(ranked.iter().all(|c| c.depth == 1));
                for comment in &ranked {
                    assert_eq!(
                        comment.votes,
                        counts[comment.text.as_str()],
                        "{}",
                        comment.text
                    );
                }
            }
        }
    }
    if store.threaded().is_none() {
        let error = store
            .ranked(DISCUSSION, Some(&p), Sort::Top, PageRequest::first(5))
            .await
            .unwrap_err();
        assert!(matches!(error, Error::Unsupported { .. }), "{error}");
    }
}

/// The ranked thread under `parent` (the top level for `None`) read level by level with
/// [`VotedComments::ranked`](mongo_social::comments::VotedComments::ranked): the page `request` asks
/// for, and under each comment the first page of its replies, `depth` levels down. What
/// [`ThreadedComments::ranked_thread`] must equal.
pub fn per_level_reads<'a>(
    store: &'a dyn CommentStore,
    parent: Option<&'a str>,
    sort: Sort,
    request: PageRequest,
    depth: usize,
) -> futures::future::BoxFuture<'a, Page<Thread>> {
    Box::pin(async move {
        let limit = request.limit;
        let page = store
            .ranked(DISCUSSION, parent, sort, request)
            .await
            .expect("a ranked page");
        let mut items = Vec::with_capacity(page.items.len());
        for comment in page.items {
            let replies = match depth {
                0 => None,
                _ => Some(
                    per_level_reads(
                        store,
                        Some(&comment.link),
                        sort,
                        PageRequest::first(limit),
                        depth - 1,
                    )
                    .await,
                ),
            };
            items.push(Thread { comment, replies });
        }
        Page {
            items,
            next: page.next,
        }
    })
}

/// Every comment of a thread, depth first.
fn thread_texts(page: &Page<Thread>, out: &mut Vec<String>) {
    for thread in &page.items {
        out.push(thread.comment.text.clone());
        if let Some(replies) = &thread.replies {
            thread_texts(replies, out);
        }
    }
}

/// [`ThreadedComments::ranked_thread`] on [`build_voted`]'s discussion grown three levels deep:
/// for every sort, page size and depth, the same comments in the same order with the same
/// cursors as [`per_level_reads`], the top level continued by its cursor too; and in
/// `reads(depth)` `find`s at most (all `find`s), where the per-level reads take one per comment
/// shown above `depth`.
pub async fn ranked_thread_matches_per_level_reads(
    store: &dyn CommentStore,
    threads: &dyn ThreadedComments,
    commands: &CommandCounter,
    reads: fn(usize) -> usize,
) {
    let p = build_voted(store).await;
    let replies = read_ranked(store, Some(&p), Sort::Top, 10).await;
    let p1 = &replies.iter().find(|c| c.text == "p1").expect("p1").link;
    let q = &read_ranked(store, None, Sort::Best, 10).await[0];
    assert_eq!(q.text, "q");
    // Deeper levels: p1 -> p1a (2 up), p1b (1 down), p1c; p1a -> p1a1; p1a1 -> p1a1x; q -> q1.
    let mut deeper = Vec::new();
    for (parent, text, ups, downs) in [
        (p1.clone(), "p1a", 2, 0),
        (p1.clone(), "p1b", 0, 1),
        (p1.clone(), "p1c", 1, 1),
        (q.link.clone(), "q1", 1, 0),
    ] {
        let reply = threads
            .reply(DISCUSSION, &parent, new(text))
            .await
            .expect("reply");
        cast(store, &reply.link, "deep", ups, downs).await;
        deeper.push(reply);
    }
    let p1a1 = threads
        .reply(DISCUSSION, &deeper[0].link, new("p1a1"))
        .await
        .expect("reply");
    threads
        .reply(DISCUSSION, &p1a1.link, new("p1a1x"))
        .await
        .expect("reply");

    for sort in Sort::ALL {
        for limit in [1, 2, 3, 100] {
            for depth in [0, 1, 2, 3, 4] {
                let what = format!("{sort}, pages of {limit}, depth {depth}");
                let expected =
                    per_level_reads(store, None, sort, PageRequest::first(limit), depth).await;
                commands.reset();
                let thread = threads
                    .ranked_thread(DISCUSSION, sort, PageRequest::first(limit), depth)
                    .await
                    .unwrap_or_else(|error| panic!("{what}: {error}"));
                let sent = commands.names();
                assert!(
                    sent.iter().all(|name| name == "find") && sent.len() <= reads(depth),
                    "{what}: {sent:?}"
                );
                assert_eq!(thread, expected, "{what}");
                // The top level continued by its cursor, as `ranked` continues it.
                if let Some(next) = thread.next {
                    let request = PageRequest::after(limit, next);
                    let expected = per_level_reads(store, None, sort, request.clone(), depth).await;
                    let thread = threads
                        .ranked_thread(DISCUSSION, sort, request, depth)
                        .await
                        .unwrap_or_else(|error| panic!("{what}, page 2: {error}"));
                    assert_eq!(thread, expected, "{what}, page 2");
                }
            }
        }
    }
    // Everything, in the ranking "top" gives each level (ties in posting order).
    let all = threads
        .ranked_thread(DISCUSSION, Sort::Top, PageRequest::first(100), 10)
        .await
        .unwrap();
    let mut texts = Vec::new();
    thread_texts(&all, &mut texts);
    assert_eq!(
        texts,
        [
            "p", "p1", "p1a", "p1a1", "p1a1x", "p1c", "p1b", "p3", "p2", "q", "q1", "t", "r", "s",
            "u"
        ]
    );
    // The deepest comment read has its replies read (none); below the depth asked, none are.
    let p1a1x = &all.items[0].replies.as_ref().unwrap().items[0]
        .replies
        .as_ref()
        .unwrap()
        .items[0]
        .replies
        .as_ref()
        .unwrap()
        .items[0]
        .replies
        .as_ref()
        .unwrap()
        .items[0];
    assert_eq!(p1a1x.comment.text, "p1a1x");
    assert_eq!(p1a1x.comment.depth, 4);
    assert_eq!(p1a1x.replies.as_ref().map(|r| r.items.len()), Some(0));
    let shallow = threads
        .ranked_thread(DISCUSSION, Sort::Top, PageRequest::first(100), 0)
        .await
        .unwrap();
    assert!(shallow.items.iter().all(|t| t.replies.is_none()));
    // The top level's errors, as `ranked` gives them.
    let error = threads
        .ranked_thread("no-such-discussion", Sort::Top, PageRequest::first(5), 2)
        .await
        .unwrap_err();
    assert!(error.is_not_found(), "{error}");
    let error = threads
        .ranked_thread(DISCUSSION, Sort::Top, PageRequest::first(0), 2)
        .await
        .unwrap_err();
    assert!(error.is_invalid_input(), "{error}");
}

/// Keyset pages of "top" while votes change between pages: votes that move comments already
/// listed further up, and comments still to come further down, neither repeat nor skip a
/// comment; each page is in the ranking of the moment it is read.
pub async fn ranked_paging_while_voting(store: &dyn CommentStore) {
    create(store).await;
    let posted = post_many(store, 9).await;
    // Scores 3 1 2 0 3 1 2 0 1: top order c0 c4 c2 c6 c1 c5 c8 c3 c7 (ties in posting order).
    for (i, ups) in [3, 1, 2, 0, 3, 1, 2, 0, 1].into_iter().enumerate() {
        cast(store, &posted[i].link, "fan", ups, 0).await;
    }
    let link = |i: usize| posted[i].link.as_str();
    let mut seen = Vec::new();
    let mut request = PageRequest::first(2);
    let mut round = 0;
    loop {
        let page = store
            .ranked(DISCUSSION, None, Sort::Top, request)
            .await
            .unwrap();
        check_page_order(&page, Sort::Top, 2);
        seen.extend(texts(&page.items));
        match round {
            // Listed: c0 c4 (cursor at 3). c0 up to 4 (stays above); c6 down to 1 (stays below).
            0 => {
                store
                    .vote(DISCUSSION, link(0), "late", Vote::Up)
                    .await
                    .unwrap();
                store
                    .vote(DISCUSSION, link(6), "late", Vote::Down)
                    .await
                    .unwrap();
            }
            // Listed: c2 c1 (cursor at 1, c1). c2 up to 3; c5 down to 0; a fan of c4 takes
            // their vote back (3 to 2, still above).
            1 => {
                store
                    .vote(DISCUSSION, link(2), "late", Vote::Up)
                    .await
                    .unwrap();
                store
                    .vote(DISCUSSION, link(5), "late", Vote::Down)
                    .await
                    .unwrap();
                store
                    .retract_vote(DISCUSSION, link(4), "fan0")
                    .await
                    .unwrap();
            }
            _ => {}
        }
        round += 1;
        match page.next {
            Some(next) => request = PageRequest::after(2, next),
            None => break,
        }
    }
    assert_eq!(
        seen,
        ["c0", "c4", "c2", "c1", "c6", "c8", "c3", "c5", "c7"],
        "each comment once, in the ranking of the moment"
    );
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 9, "no repeats");
}

/// Bad input: a typed error each, and nothing written.
pub async fn vote_bad_input(
    store: &dyn CommentStore,
    documents: impl Fn() -> futures::future::BoxFuture<'static, u64>,
) {
    create(store).await;
    let posted = post_many(store, 3).await;
    let link = posted[0].link.as_str();
    store.vote(DISCUSSION, link, "u1", Vote::Up).await.unwrap();
    let deleted = posted[1].link.as_str();
    let tombstone = store.delete(DISCUSSION, deleted).await.unwrap() == Deletion::Tombstoned;
    let before = documents().await;

    for blank in ["", " ", "\t"] {
        let error = store
            .vote(DISCUSSION, link, blank, Vote::Up)
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { what: "user" },
                    ..
                }
            ),
            "{blank:?}: {error}"
        );
        let error = store
            .retract_vote(DISCUSSION, link, blank)
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { what: "user" },
                    ..
                }
            ),
            "{blank:?}: {error}"
        );
        let error = store.vote(blank, link, "u1", Vote::Up).await.unwrap_err();
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
        let error = store.vote_of(DISCUSSION, link, blank).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    reason: Invalid::Blank { what: "user" },
                    ..
                }
            ),
            "{blank:?}: {error}"
        );
    }
    for bad in ["", "not a link!", "1..2"] {
        let error = store
            .vote(DISCUSSION, bad, "u1", Vote::Up)
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
            "{bad:?}: {error}"
        );
    }
    // A well-formed link no comment has.
    let unknown = match store.strategy() {
        mongo_social::comments::Strategy::Embedded => "999".to_owned(),
        _ => {
            let mut unknown = link.to_owned();
            let last = unknown.pop().unwrap();
            unknown.push(if last == '9' { '8' } else { '9' });
            unknown
        }
    };
    let error = store
        .vote(DISCUSSION, &unknown, "u1", Vote::Up)
        .await
        .unwrap_err();
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
        .retract_vote(DISCUSSION, &unknown, "u1")
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::NotFound { .. }),
        "{unknown}: {error}"
    );
    let error = store
        .vote("no-such-discussion", link, "u1", Vote::Up)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    // An invalid value, as a request carries it, never reaches the store.
    for dir in [2, -2, 7] {
        let error = Vote::from_dir(dir).unwrap_err();
        assert!(
            matches!(error, Error::InvalidInput { reason: Invalid::Vote { value }, .. } if value == dir)
                && error.is_invalid_input(),
            "{error}"
        );
    }
    assert!(matches!(
        Vote::try_from(0),
        Err(Error::InvalidInput {
            reason: Invalid::Vote { value: 0 },
            ..
        })
    ));
    if tombstone {
        let error = store
            .vote(DISCUSSION, deleted, "u1", Vote::Down)
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

    // Ranked pages: limits, cursors of another sort, parent or view, unknown parents.
    for limit in [0, PageRequest::MAX_LIMIT + 1] {
        let error = store
            .ranked(DISCUSSION, None, Sort::Best, PageRequest::first(limit))
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
    let page = store
        .ranked(DISCUSSION, None, Sort::Best, PageRequest::first(1))
        .await
        .unwrap();
    let cursor = page.next.expect("more than one comment");
    for sort in [Sort::Hot, Sort::Top, Sort::Controversial] {
        let error = store
            .ranked(
                DISCUSSION,
                None,
                sort,
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
            "{sort}: {error}"
        );
    }
    let error = store
        .chronological(
            DISCUSSION,
            mongo_social::comments::Order::OldestFirst,
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
    let chronological = store
        .chronological(
            DISCUSSION,
            mongo_social::comments::Order::OldestFirst,
            PageRequest::first(1),
        )
        .await
        .unwrap()
        .next
        .unwrap();
    let error = store
        .ranked(
            DISCUSSION,
            None,
            Sort::Best,
            PageRequest::after(1, chronological),
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
    let error = store
        .ranked(
            "no-such-discussion",
            None,
            Sort::Best,
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
    if store.threaded().is_some() {
        let error = store
            .ranked(
                DISCUSSION,
                Some(link),
                Sort::Best,
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
            "another parent's: {error}"
        );
        let error = store
            .ranked(
                DISCUSSION,
                Some(&unknown),
                Sort::Best,
                PageRequest::first(5),
            )
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
            "{error}"
        );
        let error = store
            .ranked(
                DISCUSSION,
                Some("bad link!"),
                Sort::Best,
                PageRequest::first(5),
            )
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
    }

    assert_eq!(documents().await, before, "nothing was written");
    assert_eq!(votes_of(store, link).await, Votes { ups: 1, downs: 0 });
    assert_eq!(
        store.vote_of(DISCUSSION, link, "u1").await.unwrap(),
        Some(Vote::Up)
    );
}

/// What the voter `user` of [`concurrent_voters`] votes on its `round`-th turn (`None`: takes
/// it back); rounds end on up or down for most users, on none for some.
fn turn(user: usize, round: usize, rounds: usize) -> Option<Vote> {
    if round + 1 == rounds {
        return match user % 3 {
            0 => Some(Vote::Up),
            1 => Some(Vote::Down),
            _ => None,
        };
    }
    match (user + round) % 3 {
        0 => Some(Vote::Up),
        1 => Some(Vote::Down),
        _ => None,
    }
}

/// `voters` users vote on one comment at once, each changing their vote `rounds` times (up,
/// down, taken back): the counts end equal to the votes stored, each user's vote their last.
pub async fn concurrent_voters(store: Arc<dyn CommentStore>, voters: usize, rounds: usize) {
    create(&*store).await;
    let posted = post_many(&*store, 2).await;
    let link = posted[1].link.clone();
    let mut tasks = Vec::new();
    for user in 0..voters {
        let (store, link) = (store.clone(), link.clone());
        tasks.push(tokio::spawn(async move {
            let name = format!("voter{user}");
            for round in 0..rounds {
                match turn(user, round, rounds) {
                    Some(vote) => store.vote(DISCUSSION, &link, &name, vote).await,
                    None => store.retract_vote(DISCUSSION, &link, &name).await,
                }
                .expect("vote");
            }
        }));
    }
    for task in tasks {
        task.await.expect("voter");
    }
    let mut expected = Votes::default();
    for user in 0..voters {
        let last = turn(user, rounds - 1, rounds);
        match last {
            Some(Vote::Up) => expected.ups += 1,
            Some(Vote::Down) => expected.downs += 1,
            None => {}
        }
        assert_eq!(
            store
                .vote_of(DISCUSSION, &link, &format!("voter{user}"))
                .await
                .unwrap(),
            last,
            "voter{user}"
        );
    }
    assert_eq!(
        votes_of(&*store, &link).await,
        expected,
        "counts equal the stored votes"
    );
    assert_eq!(votes_of(&*store, &posted[0].link).await, Votes::default());
    let ranked = read_ranked(&*store, None, Sort::Controversial, 1).await;
    assert_eq!(
        ranked[0].votes, expected,
        "ranked pages read the same counts"
    );
    assert_eq!(store.settle_votes(DISCUSSION).await.unwrap(), 0);
}

/// Votes from a few concurrent users through a client on `proxy` while it loses replies, then
/// cuts connections and refuses new ones ([`FaultProxy::outage_during`]); half the users use
/// `impatient`, whose retry budget is shorter than the outage, so some votes fail, some of them
/// after they were written. A failed vote is repeated, as a caller would, until it succeeds:
/// afterwards every user's vote is their last, every comment's counts equal its stored votes (a
/// vote interrupted and repeated is counted once), and nothing is left to settle.
///
/// [`FaultProxy::outage_during`]: crate::fault_proxy::FaultProxy::outage_during
pub async fn votes_survive_outage(
    store: Arc<dyn CommentStore>,
    impatient: Arc<dyn CommentStore>,
    proxy: &crate::fault_proxy::FaultProxy,
) {
    const USERS: usize = 4;
    const PER_USER: usize = 24;
    create(&*store).await;
    let links: Vec<String> = post_many(&*store, 3)
        .await
        .into_iter()
        .map(|c| c.link)
        .collect();
    let mut tasks = Vec::new();
    for user in 0..USERS {
        let voter = if user % 2 == 0 { &store } else { &impatient }.clone();
        let links = links.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("user{user}");
            let mut calls = Vec::new();
            for seq in 0..PER_USER {
                let link = links[seq % links.len()].clone();
                let vote = turn(user, seq / links.len(), PER_USER / links.len());
                let mut failures = 0;
                // The caller's repeat, after a pause, until the call succeeds.
                loop {
                    let outcome = match vote {
                        Some(vote) => voter.vote(DISCUSSION, &link, &name, vote).await,
                        None => voter.retract_vote(DISCUSSION, &link, &name).await,
                    };
                    match outcome {
                        Ok(_) => break,
                        Err(error) => {
                            assert!(error.is_retryable(), "only transient failures: {error}");
                            failures += 1;
                            assert!(failures < 100, "still failing long after the outage");
                            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                        }
                    }
                }
                calls.push((link, name.clone(), vote, failures));
                // Spread over the whole fault sequence (about 4.4 s), however fast the server:
                // voters that finished before the outage would test nothing.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            calls
        }));
    }
    let calls: Vec<_> = proxy
        .outage_during(tasks)
        .await
        .into_iter()
        .flatten()
        .collect();
    let failed = calls.iter().filter(|call| call.3 > 0).count();
    let mut last: HashMap<(&str, &str), Option<Vote>> = HashMap::new();
    for (link, user, vote, _) in &calls {
        last.insert((link, user), *vote);
    }
    for link in &links {
        let mut expected = Votes::default();
        for ((voted, user), vote) in &last {
            if voted != link {
                continue;
            }
            assert_eq!(
                store.vote_of(DISCUSSION, link, user).await.unwrap(),
                *vote,
                "{user} on {link}"
            );
            match vote {
                Some(Vote::Up) => expected.ups += 1,
                Some(Vote::Down) => expected.downs += 1,
                None => {}
            }
        }
        assert_eq!(
            votes_of(&*store, link).await,
            expected,
            "{link}: each vote counted once"
        );
    }
    assert_eq!(
        store.settle_votes(DISCUSSION).await.unwrap(),
        0,
        "nothing left marked"
    );
    crate::note(&format!(
        "comment votes_survive_outage: {} votes, {failed} failed and repeated; proxy lost {} \
         replies, refused {} connections",
        calls.len(),
        proxy.replies_lost(),
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
        "an impatient voter gave up during the outage"
    );
}

/// Commands per operation, as the strategy's docs state: a ranked page (of the top level, and
/// of a comment's replies where the strategy threads) is one `find`; votes send `find` (the
/// comment), their own reads and writes of the vote, and `apply` (the strategy's change of
/// counts): a first vote `find, insert, <apply>, update`; the same vote again `find, insert,
/// find`; a change `find, insert, find, update, <apply>, update`; a retraction `find, find,
/// update, <apply>, delete`. Where `locked`, each vote holds the discussion's lock (an `insert`
/// after the first command, a `delete` last).
pub async fn vote_command_counts(
    store: &dyn CommentStore,
    commands: &CommandCounter,
    locked: bool,
    apply: &[&str],
) {
    create(store).await;
    let posted = post_many(store, 6).await;
    store
        .vote(DISCUSSION, &posted[0].link, "warm-up", Vote::Up)
        .await
        .unwrap();
    let link = posted[1].link.as_str();
    let expect = |reads: &[&str], last: &str| -> Vec<String> {
        let mut expected: Vec<String> = reads.iter().map(|name| name.to_string()).collect();
        if last != "none" {
            expected.extend(apply.iter().map(|name| name.to_string()));
            expected.push(last.to_owned());
        }
        if locked {
            expected.insert(1, "insert".to_owned());
            expected.push("delete".to_owned());
        }
        expected
    };
    let calls: [(&str, Option<Vote>, Vec<String>); 4] = [
        (
            "a first vote",
            Some(Vote::Up),
            expect(&["find", "insert"], "update"),
        ),
        (
            "the same vote again",
            Some(Vote::Up),
            expect(&["find", "insert", "find"], "none"),
        ),
        (
            "a change",
            Some(Vote::Down),
            expect(&["find", "insert", "find", "update"], "update"),
        ),
        (
            "a retraction",
            None,
            expect(&["find", "find", "update"], "delete"),
        ),
    ];
    for (what, vote, expected) in calls {
        commands.reset();
        match vote {
            Some(vote) => store.vote(DISCUSSION, link, "u1", vote).await,
            None => store.retract_vote(DISCUSSION, link, "u1").await,
        }
        .unwrap();
        assert_eq!(commands.names(), expected, "{what}");
    }
    for sort in Sort::ALL {
        let mut request = PageRequest::first(2);
        for _ in 0..2 {
            commands.reset();
            let page = store.ranked(DISCUSSION, None, sort, request).await.unwrap();
            assert_eq!(commands.names(), ["find"], "a ranked page by {sort}");
            request = PageRequest::after(2, page.next.unwrap());
        }
    }
    if let Some(threads) = store.threaded() {
        threads
            .reply(DISCUSSION, &posted[0].link, new("r"))
            .await
            .unwrap();
        commands.reset();
        let page = store
            .ranked(
                DISCUSSION,
                Some(&posted[0].link),
                Sort::Best,
                PageRequest::first(5),
            )
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(commands.names(), ["find"], "a ranked page of replies");
    }
}

/// Votes cut off part-way, rebuilt in `votes` (the store's votes collection) as a failure leaves
/// them, then finished by the caller's repeat or by [`VotedComments::settle_votes`]: each change
/// counted exactly once.
///
/// - a change claimed but not counted (the vote's document holds its mark; the counts do not
///   have it): reads as cast, and the repeat counts it;
/// - a change counted whose mark was not cleared (the clear's reply lost): the repeat finds the
///   mark, whose count the comment already holds, and counts nothing;
/// - a retraction and a first vote claimed but not counted: settled, and repeated.
///
/// [`VotedComments::settle_votes`]: mongo_social::comments::VotedComments::settle_votes
pub async fn interrupted_votes_count_once(
    store: &dyn CommentStore,
    votes: mongodb::Collection<bson::Document>,
) {
    use bson::{doc, oid::ObjectId};
    create(store).await;
    let link = post_many(store, 1).await.remove(0).link;
    let link = link.as_str();
    let pair = |user: &str| doc! { "discussion": DISCUSSION, "comment": link, "user": user };
    let mark = |value: i32, ups: i64, downs: i64| {
        doc! { "$set": { "value": value, "pending": { "op": ObjectId::new(), "ups": ups, "downs": downs } } }
    };
    store.vote(DISCUSSION, link, "u1", Vote::Up).await.unwrap();

    // Up to down, claimed, not counted.
    votes
        .update_one(
            doc! { "_id": pair("u1"), "discussion_id": DISCUSSION },
            mark(-1, -1, 1),
        )
        .await
        .unwrap();
    assert_eq!(votes_of(store, link).await, Votes { ups: 1, downs: 0 });
    assert_eq!(
        store.vote_of(DISCUSSION, link, "u1").await.unwrap(),
        Some(Vote::Down)
    );
    assert_eq!(
        store
            .vote(DISCUSSION, link, "u1", Vote::Down)
            .await
            .unwrap(),
        Some(Vote::Down),
        "the repeat finds its vote cast"
    );
    assert_eq!(
        votes_of(store, link).await,
        Votes { ups: 0, downs: 1 },
        "and counted once"
    );

    // Down to up, counted, its mark not cleared.
    let counted = mark(1, 1, -1);
    votes
        .update_one(
            doc! { "_id": pair("u1"), "discussion_id": DISCUSSION },
            counted.clone(),
        )
        .await
        .unwrap();
    assert_eq!(store.settle_votes(DISCUSSION).await.unwrap(), 1);
    assert_eq!(votes_of(store, link).await, Votes { ups: 1, downs: 0 });
    votes
        .update_one(
            doc! { "_id": pair("u1"), "discussion_id": DISCUSSION },
            counted,
        )
        .await
        .unwrap();
    assert_eq!(
        store.vote(DISCUSSION, link, "u1", Vote::Up).await.unwrap(),
        Some(Vote::Up)
    );
    assert_eq!(
        votes_of(store, link).await,
        Votes { ups: 1, downs: 0 },
        "a count that landed is not applied again"
    );

    // A retraction, claimed, not counted: settled.
    votes
        .update_one(
            doc! { "_id": pair("u1"), "discussion_id": DISCUSSION },
            mark(0, -1, 0),
        )
        .await
        .unwrap();
    assert_eq!(store.vote_of(DISCUSSION, link, "u1").await.unwrap(), None);
    assert_eq!(store.settle_votes(DISCUSSION).await.unwrap(), 1);
    assert_eq!(votes_of(store, link).await, Votes::default());
    assert_eq!(
        votes.count_documents(doc! {}).await.unwrap(),
        0,
        "retracted: no document"
    );

    // A first vote, claimed, not counted: the repeat counts it.
    votes
        .insert_one(doc! {
            "_id": pair("u2"),
            "discussion_id": DISCUSSION,
            "comment": link,
            "user": "u2",
            "value": 1,
            "pending": { "op": ObjectId::new(), "ups": 1_i64, "downs": 0_i64 },
        })
        .await
        .unwrap();
    assert_eq!(
        store.vote(DISCUSSION, link, "u2", Vote::Up).await.unwrap(),
        Some(Vote::Up)
    );
    assert_eq!(votes_of(store, link).await, Votes { ups: 1, downs: 0 });
    assert_eq!(
        store.settle_votes(DISCUSSION).await.unwrap(),
        0,
        "nothing left marked"
    );
}
