//! What the graph's reads return: routes, subscriptions, counts, rebuild reports.

use std::fmt;

use bson::{Bson, Document};

use crate::setters::settings;
use crate::Result;

/// One route by which an owner follows a user.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// The owner follows the user directly (the seed's `"!"`).
    Direct,
    /// The owner follows this group, of which the user is a member.
    Group(String),
}

impl Origin {
    /// The origin as stored: `"!"` or `"#<group>"` (the `#` keeps any group name apart from
    /// `"!"`).
    pub fn as_stored(&self) -> String {
        match self {
            Origin::Direct => "!".to_owned(),
            Origin::Group(group) => format!("#{group}"),
        }
    }

    fn from_stored(stored: &str) -> Option<Self> {
        match stored {
            "!" => Some(Origin::Direct),
            _ => stored
                .strip_prefix('#')
                .map(|g| Origin::Group(g.to_owned())),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Direct => f.write_str("direct"),
            Origin::Group(group) => write!(f, "group {group}"),
        }
    }
}

/// That `owner` follows `user`, and by which routes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Who follows.
    pub owner: String,
    /// Whom.
    pub user: String,
    /// Every route, sorted: [`Origin::Direct`] first, then groups by name.
    pub origins: Vec<Origin>,
}

impl Subscription {
    /// Reads a subscription stored in `collection`.
    pub(super) fn from_document(collection: &str, document: &Document) -> Result<Self> {
        let corrupt = |field: &str| {
            crate::bson_ext::corrupt(
                collection,
                document.get("_id").cloned(),
                format!("a subscription without a valid `{field}`"),
            )
        };
        let text = |field: &str| -> Result<String> {
            document
                .get_str(field)
                .map(str::to_owned)
                .map_err(|_| corrupt(field))
        };
        let mut origins: Vec<Origin> = document
            .get_array("origins")
            .map_err(|_| corrupt("origins"))?
            .iter()
            .filter_map(Bson::as_str)
            .filter_map(Origin::from_stored)
            .collect();
        origins.sort();
        Ok(Self {
            owner: text("owner")?,
            user: text("user")?,
            origins,
        })
    }
}

/// A user's follower and following counts, by any route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct UserStats {
    /// Users who follow this one (directly or through a group).
    pub followers: u64,
    /// Users this one follows (directly or through a group).
    pub following: u64,
}

/// What [`super::FollowGraph::rebuild`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RebuildReport {
    /// Subscriptions that were missing.
    pub created: usize,
    /// Subscriptions whose origins were wrong.
    pub corrected: usize,
    /// Subscriptions that had no route left.
    pub removed: usize,
    /// Subscriptions that were right.
    pub unchanged: usize,
}

/// Someone a user may know: a user they do not follow yet, whom people they follow follow.
/// Returned by [`FollowGraph::recommendations`](super::FollowGraph::recommendations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recommendation {
    /// The recommended user.
    pub user: String,
    /// The rank: [`followed_by`](Self::followed_by), plus the options' group boost for each of
    /// [`shared_groups`](Self::shared_groups). Pages are in descending score, then by user id.
    pub score: u64,
    /// How many of the people the user follows follow this one, among those the read covered
    /// (all of them, unless the user or one of the people they follow follows more than the
    /// read's bounds: see [`RecommendOptions`]).
    pub followed_by: u64,
    /// The first of those people, by user id, up to [`RecommendOptions::reasons`] of them.
    pub via: Vec<String>,
    /// Groups both users are members of (with a group boost on; empty otherwise).
    pub shared_groups: Vec<String>,
}

impl Recommendation {
    /// Why this user is recommended, in words: `followed by ann, bob and 4 others you follow`,
    /// and `; also in rust` for shared groups.
    ///
    /// ```
    /// use mongo_social::graph::Recommendation;
    ///
    /// let recommendation = Recommendation {
    ///     user: "dan".into(),
    ///     score: 6,
    ///     followed_by: 6,
    ///     via: vec!["ann".into(), "bob".into()],
    ///     shared_groups: vec![],
    /// };
    /// assert_eq!(recommendation.reason(), "followed by ann, bob and 4 others you follow");
    /// ```
    pub fn reason(&self) -> String {
        let mut reason = String::from("followed by ");
        let others = (self.followed_by as usize).saturating_sub(self.via.len());
        let mut names: Vec<String> = self.via.clone();
        match others {
            0 => {}
            1 => names.push("1 other".to_owned()),
            n => names.push(format!("{n} others")),
        }
        match names.as_slice() {
            [] => reason.push_str("nobody"),
            [one] => reason.push_str(one),
            [first @ .., last] => {
                reason.push_str(&first.join(", "));
                reason.push_str(" and ");
                reason.push_str(last);
            }
        }
        reason.push_str(" you follow");
        if !self.shared_groups.is_empty() {
            reason.push_str("; also in ");
            reason.push_str(&self.shared_groups.join(", "));
        }
        reason
    }
}

impl fmt::Display for Recommendation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.user, self.reason())
    }
}

settings! {
    /// How [`FollowGraph::recommendations`](super::FollowGraph::recommendations) reads and ranks,
    /// set on the graph's builder
    /// ([`FollowGraphBuilder::recommendations`](super::FollowGraphBuilder::recommendations)).
    ///
    /// A recommendation read is bounded whatever the graph: it reads at most
    /// [`followees`](Self::followees) of the user's subscriptions, and of each of those followees at
    /// most [`per_followee`](Self::per_followee) of theirs. A followee who follows more than that (a
    /// hub) is sampled, not read whole: a window of `per_followee` of their subscriptions, starting
    /// at the reader's own id (so different readers see different parts of a hub's list, and one
    /// reader always the same part), for at most [`hubs`](Self::hubs) hubs per read. No read ever
    /// lists anyone's followers, so a celebrity costs nothing more than anyone else.
    ///
    /// ```
    /// use mongo_social::graph::RecommendOptions;
    ///
    /// let options = RecommendOptions::default()
    ///     .followees(100)
    ///     .per_followee(50)
    ///     .group_boost(2);
    /// // followees, their stats, 50 subscriptions of each, and with the group boost the user's 20
    /// // groups and up to 50 memberships of candidates in each.
    /// assert_eq!(options.bound(), 100 + 100 + 100 * 50 + 20 + 20 * 50);
    /// ```
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RecommendOptions, fields pub(crate), set by RecommendOptions;
    /// 200 followees, 100 of each one's subscriptions, 10 hubs sampled, no group boost (20 of
    /// the user's groups when it is set), 3 names per reason, `$graphLookup` where the server
    /// has it.
    impl Default;

    /// The most subscriptions of the user read (1 to 10,000; default 200): the first by user
    /// id. A user who follows more is recommended from these.
    followees: usize = 200,

    /// The most subscriptions read of each followee (1 to 10,000; default 100). A followee with
    /// more is a hub, sampled (see the type's docs).
    per_followee: usize = 100,

    /// The most hubs sampled per read (0 to 100; default 10), one or two `find`s each; the
    /// others contribute nothing to that read.
    hubs: usize = 10,

    /// Adds this much to a candidate's score for each group both users are members of (default
    /// 0: off). On, a read costs two `find`s more (the user's groups, at most
    /// [`groups`](Self::groups) of them, and the candidates' memberships in them), and the graph
    /// creates an index `{user, group}` on its memberships. Members of groups the user *follows*
    /// are followed already (seed 002's subscriptions), so they are never candidates: the
    /// groups that count are those both belong to.
    group_boost: u64 = 0,

    /// The most of the user's groups the group boost considers (1 to 1,000; default 20), the
    /// first by group id.
    groups: usize = 20,

    /// How many names of followees a recommendation carries in
    /// [`Recommendation::via`] (0 to 100; default 3).
    reasons: usize = 3,

    /// Whether to read the followees and their subscriptions with one `aggregate` (`$lookup` and
    /// `$graphLookup`) where the server has them ([`crate::server::Capabilities::graph_lookup`]); with
    /// `false`, or elsewhere, three `find`s do. The two give the same recommendations. Default
    /// `true`.
    graph_lookup: bool = true,
}

impl RecommendOptions {
    /// The most documents one read of the graph returns before its final checks: the
    /// followees, their stats, `per_followee` of each followee's subscriptions (hubs included:
    /// each is one of the followees), and with the group boost on, the user's groups and
    /// `per_followee` memberships of candidates in each. The final checks return at most the
    /// candidates they are asked about: about twice the page's size.
    pub fn bound(&self) -> usize {
        let groups = if self.group_boost > 0 {
            self.groups + self.groups * self.per_followee
        } else {
            0
        };
        self.followees * 2 + self.followees * self.per_followee + groups
    }

    /// Fails with [`crate::Error::InvalidConfig`] for a value out of its range.
    pub(crate) fn check(&self) -> Result<()> {
        let ranges: [(&str, usize, usize, usize); 5] = [
            ("followees", self.followees, 1, 10_000),
            ("per_followee", self.per_followee, 1, 10_000),
            ("hubs", self.hubs, 0, 100),
            ("groups", self.groups, 1, 1_000),
            ("reasons", self.reasons, 0, 100),
        ];
        for (name, value, min, max) in ranges {
            if value < min || value > max {
                return Err(crate::Error::InvalidConfig {
                    reason: format!(
                        "recommendation option `{name}` is {value}, outside {min}..={max}"
                    ),
                });
            }
        }
        if self.group_boost > 1_000_000 {
            return Err(crate::Error::InvalidConfig {
                reason: format!(
                    "recommendation option `group_boost` is {}, more than 1000000",
                    self.group_boost
                ),
            });
        }
        Ok(())
    }
}
