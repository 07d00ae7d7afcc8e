//! Nothing lost, nothing duplicated: after a run, on a fresh client to the server directly (not
//! through the fault proxy), every inbox and every discussion read whole through its pages and
//! compared with the run's ledger (`run::Ledger`).
//!
//! - **Messages.** Every acknowledged send is in each of its recipients' inboxes (those it did
//!   not report skipped) exactly once, under the id it returned; a failed send is in each
//!   recipient's inbox at most once; no message is in the inbox of someone it was not sent to;
//!   no id and no payload appears twice in one inbox; every inbox's `count` is what its pages
//!   hold. Read state is not checked: marks race the reads by design.
//! - **Comments.** Every acknowledged post is in its discussion exactly once, at the link it
//!   returned; a failed one at most once; no link twice; `count` is what the pages hold.
//! - **Votes.** After `settle_votes` (which finishes votes a failure cut off part-way, as
//!   `VotedComments` documents), each (comment, user) pair's vote (`vote_of`) is the last
//!   acknowledged one or one of the failed ones made after it (a failed vote may or may not have
//!   landed), and every comment's counts equal the votes its pairs hold. A vote whose every
//!   earlier call on its pair succeeded must also have reported the previous vote the ledger
//!   says it replaced.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use futures::stream::{self, StreamExt, TryStreamExt};
use mongo_social::comments::{Comment, Order, Vote};
use mongo_social::{inbox::MessageId, retry::RetryPolicy, Message, PageRequest};

use crate::run::{self, BoxResult, Config, Ledger, Stores};

/// Items per page of the check's reads.
const PAGE: usize = 500;
/// Reads in flight at once.
const CONCURRENCY: usize = 4;
/// Problems described one by one (the rest are only counted).
const DESCRIBED: usize = 20;

/// What the check counted.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    pub sends_acknowledged: usize,
    pub seed_sends: usize,
    pub sends_failed: usize,
    /// (acknowledged send, recipient) pairs looked up.
    pub deliveries_checked: usize,
    pub lost: usize,
    pub duplicated: usize,
    /// Copies in the inbox of a user the message was not sent to (or was skipped for).
    pub misdelivered: usize,
    /// Copies of failed sends found (at most one per recipient is allowed).
    pub failed_sends_stored: usize,
    /// Messages no send of the ledger made, or under another id than the send returned.
    pub unexpected_messages: usize,
    pub messages_read: usize,
    pub inboxes: usize,
    pub inbox_counts_wrong: usize,

    pub posts_acknowledged: usize,
    pub seed_posts: usize,
    pub posts_failed: usize,
    pub comments_read: usize,
    pub comments_lost: usize,
    pub comments_duplicated: usize,
    pub failed_posts_stored: usize,
    pub unexpected_comments: usize,
    pub discussion_counts_wrong: usize,

    pub votes_acknowledged: usize,
    pub votes_failed: usize,
    /// Votes `settle_votes` finished.
    pub votes_settled: usize,
    pub vote_pairs: usize,
    /// Pairs whose vote is neither the last acknowledged one nor a failed one after it.
    pub votes_unexplained: usize,
    /// Comments whose counts were compared with their pairs' votes.
    pub tallies_checked: usize,
    pub tallies_wrong: usize,
    /// Votes that reported replacing another vote than the one their pair held.
    pub wrong_previous: usize,

    /// The first problems, described.
    pub problems: Vec<String>,
}

impl Verdict {
    /// Whether nothing was lost, duplicated or miscounted.
    pub fn ok(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.misdelivered == 0
            && self.unexpected_messages == 0
            && self.inbox_counts_wrong == 0
            && self.comments_lost == 0
            && self.comments_duplicated == 0
            && self.unexpected_comments == 0
            && self.discussion_counts_wrong == 0
            && self.votes_unexplained == 0
            && self.tallies_wrong == 0
            && self.wrong_previous == 0
    }

    fn problem(&mut self, text: String) {
        if self.problems.len() < DESCRIBED {
            self.problems.push(text);
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "sends acknowledged: {} ({} of them seeding), failed: {}; deliveries checked: {}, \
             lost: {}, duplicated: {}, misdelivered: {}; copies of failed sends found: {} (at \
             most one per recipient allowed); unexpected messages: {}; {} messages read in {} \
             inboxes, counts wrong: {}",
            self.sends_acknowledged,
            self.seed_sends,
            self.sends_failed,
            self.deliveries_checked,
            self.lost,
            self.duplicated,
            self.misdelivered,
            self.failed_sends_stored,
            self.unexpected_messages,
            self.messages_read,
            self.inboxes,
            self.inbox_counts_wrong
        )?;
        writeln!(
            f,
            "comments acknowledged: {} ({} of them seeding), failed: {}; comments read: {}, \
             lost: {}, duplicated: {}; failed posts found stored: {} (at most once allowed); \
             unexpected comments: {}; discussion counts wrong: {}",
            self.posts_acknowledged,
            self.seed_posts,
            self.posts_failed,
            self.comments_read,
            self.comments_lost,
            self.comments_duplicated,
            self.failed_posts_stored,
            self.unexpected_comments,
            self.discussion_counts_wrong
        )?;
        writeln!(
            f,
            "votes acknowledged: {}, failed: {}; interrupted votes settled: {}; (comment, user) \
             pairs checked: {}, unexplained: {}; tallies checked: {}, wrong: {}; votes \
             reporting the wrong previous vote: {}",
            self.votes_acknowledged,
            self.votes_failed,
            self.votes_settled,
            self.vote_pairs,
            self.votes_unexplained,
            self.tallies_checked,
            self.tallies_wrong,
            self.wrong_previous
        )?;
        for problem in &self.problems {
            writeln!(f, "  problem: {problem}")?;
        }
        write!(
            f,
            "{}",
            if self.ok() {
                "nothing lost, nothing duplicated"
            } else {
                "FAILED: something was lost, duplicated or miscounted"
            }
        )
    }
}

/// Checks what the server holds against `ledger`, on a fresh client of its own.
pub async fn check(config: &Config, ledger: &Ledger) -> BoxResult<Verdict> {
    let uri = run::server_uri().await?;
    // The default policy, whatever the run's: the check waits out what a loaded server takes.
    let client = run::direct_client(uri, RetryPolicy::default(), None).await?;
    let db = client.database(&config.database);
    let stores = run::stores(&db, config, RetryPolicy::default())?;
    let mut verdict = Verdict::default();
    check_inboxes(config, &stores, ledger, &mut verdict).await?;
    // Votes a failure cut off part-way are finished before the comments (and their counts)
    // are read: a count `settle_votes` completes must be in what the tallies are checked against.
    for discussion in config.discussion_ids() {
        verdict.votes_settled += stores.comments.settle_votes(&discussion).await?;
    }
    let comments = check_comments(config, &stores, ledger, &mut verdict).await?;
    check_votes(&stores, ledger, &comments, &mut verdict).await?;
    Ok(verdict)
}

async fn whole_inbox(stores: &Stores, owner: &str) -> BoxResult<(Vec<Message<String>>, u64)> {
    let mut messages = Vec::new();
    let mut request = PageRequest::first(PAGE);
    loop {
        let page = stores.inbox.inbox_page(owner, request).await?;
        let empty = page.items.is_empty();
        messages.extend(page.items);
        match page.next {
            Some(cursor) if !empty => request = PageRequest::after(PAGE, cursor),
            _ => break,
        }
    }
    let count = stores.inbox.count(owner).await?;
    Ok((messages, count))
}

async fn check_inboxes(
    config: &Config,
    stores: &Stores,
    ledger: &Ledger,
    verdict: &mut Verdict,
) -> BoxResult<()> {
    let users = config.user_names();
    let inboxes: Vec<(String, Vec<Message<String>>, u64)> = stream::iter(users.iter())
        .map(|user| async move {
            let (messages, count) = whole_inbox(stores, user).await?;
            Ok::<_, run::BoxError>((user.clone(), messages, count))
        })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    let sends: HashMap<&str, &run::SendRecord> =
        ledger.sends.iter().map(|s| (s.token.as_str(), s)).collect();
    // Per inbox: how many copies of each send (by token) it holds.
    let mut held: HashMap<&str, HashMap<&str, usize>> = HashMap::new();
    verdict.inboxes = inboxes.len();
    for (owner, messages, count) in &inboxes {
        verdict.messages_read += messages.len();
        if *count != messages.len() as u64 {
            verdict.inbox_counts_wrong += 1;
            verdict.problem(format!(
                "{owner}: count says {count}, the pages hold {}",
                messages.len()
            ));
        }
        let mut ids: HashMap<MessageId, usize> = HashMap::new();
        let mut tokens: HashMap<&str, usize> = HashMap::new();
        for message in messages {
            *ids.entry(message.id).or_default() += 1;
            let token = run::token_of(&message.payload);
            *tokens.entry(token).or_default() += 1;
            match sends.get(token) {
                None => {
                    verdict.unexpected_messages += 1;
                    verdict.problem(format!(
                        "{owner}: message {} ({token:?}) was sent by no one in the ledger",
                        message.id
                    ));
                }
                Some(send) => {
                    if let Ok((id, _)) = &send.outcome {
                        if *id != message.id {
                            verdict.unexpected_messages += 1;
                            verdict.problem(format!(
                                "{owner}: send {token} returned id {id}, its copy here is {}",
                                message.id
                            ));
                        }
                    }
                    let skipped = send
                        .outcome
                        .as_ref()
                        .is_ok_and(|(_, skipped)| skipped.contains(owner));
                    if !send.to.contains(owner) || skipped {
                        verdict.misdelivered += 1;
                        verdict.problem(format!(
                            "{owner}: holds send {token}, which was not for them"
                        ));
                    }
                }
            }
        }
        let id_copies: usize = ids.values().map(|n| n - 1).sum();
        let token_copies: usize = tokens.values().map(|n| n - 1).sum();
        if id_copies + token_copies > 0 {
            verdict.duplicated += id_copies.max(token_copies);
            for (token, n) in tokens.iter().filter(|(_, n)| **n > 1) {
                verdict.problem(format!("{owner}: send {token} is there {n} times"));
            }
        }
        held.insert(owner.as_str(), tokens);
    }
    for send in &ledger.sends {
        match &send.outcome {
            Ok((_, skipped)) => {
                verdict.sends_acknowledged += 1;
                verdict.seed_sends += usize::from(send.seed);
                for recipient in send.to.iter().filter(|r| !skipped.contains(r)) {
                    verdict.deliveries_checked += 1;
                    let copies = held
                        .get(recipient.as_str())
                        .and_then(|tokens| tokens.get(send.token.as_str()))
                        .copied()
                        .unwrap_or(0);
                    if copies == 0 {
                        verdict.lost += 1;
                        verdict.problem(format!(
                            "{recipient}: lost acknowledged send {} (to {} recipients)",
                            send.token,
                            send.to.len()
                        ));
                    }
                }
            }
            Err(_) => {
                verdict.sends_failed += 1;
                for recipient in &send.to {
                    verdict.failed_sends_stored += held
                        .get(recipient.as_str())
                        .and_then(|tokens| tokens.get(send.token.as_str()))
                        .copied()
                        .unwrap_or(0);
                }
            }
        }
    }
    Ok(())
}

/// Every discussion's comments, by discussion id, as its pages read.
type Discussions = BTreeMap<String, Vec<Comment>>;

async fn check_comments(
    config: &Config,
    stores: &Stores,
    ledger: &Ledger,
    verdict: &mut Verdict,
) -> BoxResult<Discussions> {
    let ids = config.discussion_ids();
    let mut discussions = Discussions::new();
    for discussion in &ids {
        let mut comments = Vec::new();
        let mut request = PageRequest::first(PAGE);
        loop {
            let page = stores
                .comments
                .chronological(discussion, Order::OldestFirst, request)
                .await?;
            let empty = page.items.is_empty();
            comments.extend(page.items);
            match page.next {
                Some(cursor) if !empty => request = PageRequest::after(PAGE, cursor),
                _ => break,
            }
        }
        let count = stores.comments.count(discussion).await?;
        if count != comments.len() as u64 {
            verdict.discussion_counts_wrong += 1;
            verdict.problem(format!(
                "{discussion}: count says {count}, the pages hold {}",
                comments.len()
            ));
        }
        discussions.insert(discussion.clone(), comments);
    }
    let posts: HashMap<(&str, &str), &run::PostRecord> = ledger
        .posts
        .iter()
        .map(|p| ((p.discussion.as_str(), p.token.as_str()), p))
        .collect();
    // Per discussion and token: the links holding it.
    let mut held: HashMap<(&str, &str), Vec<&str>> = HashMap::new();
    for (discussion, comments) in &discussions {
        verdict.comments_read += comments.len();
        let mut links: HashSet<&str> = HashSet::new();
        for comment in comments {
            if !links.insert(&comment.link) {
                verdict.comments_duplicated += 1;
                verdict.problem(format!("{discussion}: link {} listed twice", comment.link));
            }
            let token = run::token_of(&comment.text);
            if !posts.contains_key(&(discussion.as_str(), token)) {
                verdict.unexpected_comments += 1;
                verdict.problem(format!(
                    "{discussion}: comment {} ({token:?}) was posted by no one in the ledger",
                    comment.link
                ));
            }
            held.entry((discussion.as_str(), token))
                .or_default()
                .push(&comment.link);
        }
    }
    for post in &ledger.posts {
        let found = held
            .get(&(post.discussion.as_str(), post.token.as_str()))
            .map_or(&[][..], Vec::as_slice);
        if found.len() > 1 {
            verdict.comments_duplicated += found.len() - 1;
            verdict.problem(format!(
                "{}: post {} stored {} times ({found:?})",
                post.discussion,
                post.token,
                found.len()
            ));
        }
        match &post.outcome {
            Ok(link) => {
                verdict.posts_acknowledged += 1;
                verdict.seed_posts += usize::from(post.seed);
                if found.is_empty() {
                    verdict.comments_lost += 1;
                    verdict.problem(format!(
                        "{}: lost acknowledged post {} (link {link})",
                        post.discussion, post.token
                    ));
                } else if !found.contains(&link.as_str()) {
                    verdict.unexpected_comments += 1;
                    verdict.problem(format!(
                        "{}: post {} returned link {link}, stored at {found:?}",
                        post.discussion, post.token
                    ));
                }
            }
            Err(_) => {
                verdict.posts_failed += 1;
                verdict.failed_posts_stored += found.len();
            }
        }
    }
    Ok(discussions)
}

/// A vote as a value: 1 up, -1 down, 0 none.
fn value(vote: Option<Vote>) -> i8 {
    match vote {
        Some(Vote::Up) => 1,
        Some(Vote::Down) => -1,
        _ => 0,
    }
}

async fn check_votes(
    stores: &Stores,
    ledger: &Ledger,
    discussions: &Discussions,
    verdict: &mut Verdict,
) -> BoxResult<()> {
    // Each pair's calls, in the order its (only) client made them.
    let mut pairs: BTreeMap<(&str, &str, &str), Vec<&run::VoteRecord>> = BTreeMap::new();
    for vote in &ledger.votes {
        if vote.outcome.is_ok() {
            verdict.votes_acknowledged += 1;
        } else {
            verdict.votes_failed += 1;
        }
        pairs
            .entry((
                vote.discussion.as_str(),
                vote.link.as_str(),
                vote.user.as_str(),
            ))
            .or_default()
            .push(vote);
    }
    verdict.vote_pairs = pairs.len();
    let held: Vec<Option<Vote>> = stream::iter(pairs.keys())
        .map(|(discussion, link, user)| async move {
            Ok::<_, run::BoxError>(stores.comments.vote_of(discussion, link, user).await?)
        })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    // Per comment: the ups and downs its pairs hold.
    let mut tallies: HashMap<(&str, &str), (u64, u64)> = HashMap::new();
    for (((discussion, link, user), calls), holds) in pairs.iter().zip(&held) {
        // The previous vote each call reported, while every call before it succeeded.
        let mut state = 0i8;
        for call in calls {
            match call.outcome {
                Ok(previous) => {
                    if value(previous) != state {
                        verdict.wrong_previous += 1;
                        verdict.problem(format!(
                            "{discussion} {link} {user}: a vote reported replacing {previous:?}, \
                             the pair held {state}"
                        ));
                    }
                    state = value(call.vote);
                }
                Err(_) => break,
            }
        }
        // What the pair may hold: the last acknowledged vote, or any failed one after it.
        let last_ok = calls.iter().rposition(|c| c.outcome.is_ok());
        let mut allowed: Vec<i8> = vec![last_ok.map_or(0, |i| value(calls[i].vote))];
        let after = last_ok.map_or(0, |i| i + 1);
        allowed.extend(calls[after..].iter().map(|c| value(c.vote)));
        let holds = value(*holds);
        if !allowed.contains(&holds) {
            verdict.votes_unexplained += 1;
            verdict.problem(format!(
                "{discussion} {link} {user}: holds {holds}, the calls allow only {allowed:?}"
            ));
        }
        let tally = tallies.entry((discussion, link)).or_default();
        match holds {
            1 => tally.0 += 1,
            -1 => tally.1 += 1,
            _ => {}
        }
    }
    for (discussion, comments) in discussions {
        for comment in comments {
            verdict.tallies_checked += 1;
            let (ups, downs) = tallies
                .remove(&(discussion.as_str(), comment.link.as_str()))
                .unwrap_or((0, 0));
            if (comment.votes.ups, comment.votes.downs) != (ups, downs) {
                verdict.tallies_wrong += 1;
                verdict.problem(format!(
                    "{discussion} {}: counts {} up, {} down; its voters hold {ups} up, {downs} down",
                    comment.link, comment.votes.ups, comment.votes.downs
                ));
            }
        }
    }
    for ((discussion, link), (ups, downs)) in tallies {
        if ups + downs > 0 {
            verdict.tallies_wrong += 1;
            verdict.problem(format!(
                "{discussion} {link}: {ups} up and {downs} down votes on a comment no page lists"
            ));
        }
    }
    Ok(())
}
