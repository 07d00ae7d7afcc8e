//! Votes and Reddit's comment sorts: what a user's vote is, a comment's counts, and the key each
//! sort orders comments by (pure functions, the same in every strategy).
//!
//! The formulas are those of Reddit's published ranking code (`r2/lib/db/_sorts.pyx`), with one
//! change the crate makes on purpose: "best" is the lower bound of the Wilson score interval at
//! 95 % confidence (z = 1.96, as in Evan Miller's "How Not To Sort By Average Rating", which
//! Reddit's sort follows), where Reddit's code uses 80 % (z = 1.28). The lower confidence ranks a
//! comment with few votes higher; 95 % asks more evidence before a comment with few votes passes
//! one with many.

use crate::error::Invalid;
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::names::{serde_by_name, unknown};
use crate::{Error, Result};

/// A user's vote on a comment.
///
/// Named `"up"` and `"down"`: `FromStr` parses a request's name (anything else is
/// [`Invalid::Name`](crate::error::Invalid::Name)), `Display` prints it, and serde uses the
/// same text. [`Vote::from_dir`] reads Reddit's numeric direction instead.
///
/// ```
/// use mongo_social::comments::Vote;
/// assert_eq!("down".parse::<Vote>().unwrap(), Vote::Down);
/// assert_eq!(Vote::Up.to_string(), "up");
/// assert!("sideways".parse::<Vote>().unwrap_err().is_invalid_input());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vote {
    /// An upvote: the comment adds to the discussion.
    Up,
    /// A downvote.
    Down,
}

impl Vote {
    /// The vote's name: `"up"` or `"down"`.
    pub fn name(self) -> &'static str {
        match self {
            Vote::Up => "up",
            Vote::Down => "down",
        }
    }

    /// `1` for [`Vote::Up`], `-1` for [`Vote::Down`]: the `value` a vote document stores.
    pub fn value(self) -> i32 {
        match self {
            Vote::Up => 1,
            Vote::Down => -1,
        }
    }

    /// The vote a request's direction asks for, as Reddit's API takes it: `1` up, `-1` down,
    /// `0` no vote (take it back).
    ///
    /// ```
    /// use mongo_social::comments::Vote;
    /// assert_eq!(Vote::from_dir(1).unwrap(), Some(Vote::Up));
    /// assert_eq!(Vote::from_dir(0).unwrap(), None);
    /// assert!(Vote::from_dir(2).unwrap_err().is_invalid_input());
    /// ```
    ///
    /// # Errors
    ///
    /// [`Invalid::Vote`](crate::error::Invalid::Vote) for any other value.
    pub fn from_dir(dir: i64) -> Result<Option<Vote>> {
        match dir {
            1 => Ok(Some(Vote::Up)),
            -1 => Ok(Some(Vote::Down)),
            0 => Ok(None),
            value => Err(Error::InvalidInput {
                reason: Invalid::Vote { value },
            }),
        }
    }

    /// The vote a stored `value` (1, -1; 0 or missing: none) holds.
    pub(super) fn of_value(value: i32) -> Option<Vote> {
        match value.cmp(&0) {
            Ordering::Greater => Some(Vote::Up),
            Ordering::Less => Some(Vote::Down),
            Ordering::Equal => None,
        }
    }
}

impl TryFrom<i64> for Vote {
    type Error = Error;

    /// `1` up, `-1` down; anything else (0 too) is [`Invalid::Vote`](crate::error::Invalid::Vote).
    fn try_from(value: i64) -> Result<Vote> {
        Vote::from_dir(value)?.ok_or(Error::InvalidInput {
            reason: Invalid::Vote { value },
        })
    }
}

impl fmt::Display for Vote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Vote {
    type Err = Error;

    /// `"up"` or `"down"`; anything else is [`Invalid::Name`](crate::error::Invalid::Name).
    fn from_str(name: &str) -> Result<Vote> {
        match name {
            "up" => Ok(Vote::Up),
            "down" => Ok(Vote::Down),
            other => Err(unknown("vote", other, "up, down")),
        }
    }
}

serde_by_name!(Vote);

/// A comment's votes: how many users vote it up and down. Every [`super::Comment`] carries its
/// own, exact under concurrent voting (see [`super::VotedComments`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Votes {
    /// Users voting the comment up.
    pub ups: u64,
    /// Users voting it down.
    pub downs: u64,
}

/// The Unix time Reddit's "hot" counts from (2005-12-08T07:46:43Z).
const HOT_EPOCH_SECONDS: f64 = 1_134_028_003.0;
/// Seconds of age that weigh as much as a tenfold score in "hot" (12.5 hours).
const HOT_DECAY_SECONDS: f64 = 45_000.0;
/// The normal quantile of a two-sided 95 % confidence interval.
const WILSON_Z: f64 = 1.959_963_984_540_054;

impl Votes {
    /// Counts from stored (possibly negative, if altered by hand) numbers.
    pub(super) fn from_stored(ups: i64, downs: i64) -> Self {
        Self {
            ups: ups.max(0) as u64,
            downs: downs.max(0) as u64,
        }
    }

    /// Ups less downs: the "top" sort's key.
    ///
    /// ```
    /// use mongo_social::comments::Votes;
    /// assert_eq!(Votes { ups: 3, downs: 5 }.score(), -2);
    /// ```
    pub fn score(self) -> i64 {
        self.ups as i64 - self.downs as i64
    }

    /// The lower bound of the Wilson score interval (95 %) of the share of upvotes: the "best"
    /// sort's key, in `0..=1`; 0 without votes. A comment with 10 ups and 1 down (0.62) ranks
    /// above one with 1 up and none down (0.21): more votes, more confidence.
    ///
    /// ```
    /// use mongo_social::comments::Votes;
    /// let many = Votes { ups: 10, downs: 1 }.best();
    /// let one = Votes { ups: 1, downs: 0 }.best();
    /// assert!(many > one && one > 0.0);
    /// ```
    pub fn best(self) -> f64 {
        let n = (self.ups + self.downs) as f64;
        if n == 0.0 {
            return 0.0;
        }
        let p = self.ups as f64 / n;
        let z2 = WILSON_Z * WILSON_Z;
        let centre = p + z2 / (2.0 * n);
        let spread = WILSON_Z * ((p * (1.0 - p) + z2 / (4.0 * n)) / n).sqrt();
        ((centre - spread) / (1.0 + z2 / n)).max(0.0)
    }

    /// Reddit's "hot": the order of magnitude of the score, signed, plus the posting time in
    /// units of 12.5 hours, rounded to 7 decimals. A comment needs ten times the score to rank
    /// with one posted 12.5 hours later; votes never make an old comment hot again.
    pub fn hot(self, posted: bson::DateTime) -> f64 {
        let score = self.score();
        let order = (score.unsigned_abs().max(1) as f64).log10();
        let sign = score.signum() as f64;
        let seconds = posted.timestamp_millis() as f64 / 1000.0 - HOT_EPOCH_SECONDS;
        ((sign * order + seconds / HOT_DECAY_SECONDS) * 1e7).round() / 1e7
    }

    /// Reddit's controversy: 0 unless the comment has both ups and downs; otherwise the number
    /// of votes raised to the balance between them (the smaller count over the larger), so many
    /// votes evenly split rank first.
    ///
    /// ```
    /// use mongo_social::comments::Votes;
    /// assert_eq!(Votes { ups: 4, downs: 4 }.controversy(), 8.0);
    /// assert_eq!(Votes { ups: 9, downs: 0 }.controversy(), 0.0);
    /// ```
    pub fn controversy(self) -> f64 {
        if self.ups == 0 || self.downs == 0 {
            return 0.0;
        }
        let (ups, downs) = (self.ups as f64, self.downs as f64);
        let balance = if ups > downs {
            downs / ups
        } else {
            ups / downs
        };
        (ups + downs).powf(balance)
    }
}

/// The order of a ranked page ([`super::VotedComments::ranked`]): highest key first, comments
/// with equal keys in posting order.
///
/// Named as Reddit names them (`"best"`, `"hot"`, `"top"`, `"controversial"`): `FromStr` parses
/// a request's name (anything else is [`Invalid::Name`](crate::error::Invalid::Name)),
/// `Display` prints it, and serde uses the same text, so `?sort=best` deserializes into a
/// `Sort`.
///
/// ```
/// use mongo_social::comments::Sort;
/// for sort in Sort::ALL {
///     assert_eq!(sort.to_string().parse::<Sort>().unwrap(), sort);
/// }
/// assert!("new".parse::<Sort>().unwrap_err().is_invalid_input());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Sort {
    /// By [`Votes::best`]: the Wilson lower bound of the share of upvotes.
    Best,
    /// By [`Votes::hot`]: score with time decay.
    Hot,
    /// By [`Votes::score`]: ups less downs.
    Top,
    /// By [`Votes::controversy`]: many votes, evenly split.
    Controversial,
}

impl Sort {
    /// Every sort.
    pub const ALL: [Sort; 4] = [Sort::Best, Sort::Hot, Sort::Top, Sort::Controversial];

    /// The sort's name, as Reddit spells it: `"best"`, `"hot"`, `"top"`, `"controversial"`.
    pub fn name(self) -> &'static str {
        match self {
            Sort::Best => "best",
            Sort::Hot => "hot",
            Sort::Top => "top",
            Sort::Controversial => "controversial",
        }
    }

    /// The key a comment with `votes`, posted at `posted`, sorts by (highest first).
    ///
    /// ```
    /// use mongo_social::comments::{Sort, Votes};
    /// let votes = Votes { ups: 7, downs: 2 };
    /// assert_eq!(Sort::Top.key(votes, bson::DateTime::now()), 5.0);
    /// ```
    pub fn key(self, votes: Votes, posted: bson::DateTime) -> f64 {
        let key = match self {
            Sort::Best => votes.best(),
            Sort::Hot => votes.hot(posted),
            Sort::Top => votes.score() as f64,
            Sort::Controversial => votes.controversy(),
        };
        // One zero: -0.0 and 0.0 compare equal on the server but not under `total_cmp`.
        key + 0.0
    }

    /// The letter naming the sort in cursor tags.
    pub(super) fn letter(self) -> char {
        match self {
            Sort::Best => 'b',
            Sort::Hot => 'h',
            Sort::Top => 't',
            Sort::Controversial => 'c',
        }
    }
}

impl fmt::Display for Sort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Sort {
    type Err = Error;

    /// `"best"`, `"hot"`, `"top"` or `"controversial"`; anything else is
    /// [`Invalid::Name`](crate::error::Invalid::Name).
    fn from_str(name: &str) -> Result<Sort> {
        Sort::ALL
            .into_iter()
            .find(|sort| sort.name() == name)
            .ok_or_else(|| unknown("sort", name, "best, hot, top, controversial"))
    }
}

serde_by_name!(Sort);

/// Ranks `items` (each with its sort key and a tiebreak in posting order) highest key first,
/// equal keys oldest first, and keeps those after `after` (a cursor's key and tiebreak): the
/// in-memory ranking of the strategies that read a discussion's comments in one document or a
/// few.
pub(super) fn rank_after<K: Ord + Copy, T>(
    mut items: Vec<(f64, K, T)>,
    after: Option<(f64, K)>,
) -> Vec<(f64, K, T)> {
    items.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    match after {
        None => items,
        Some((key, tiebreak)) => items
            .into_iter()
            .filter(|(k, t, _)| match k.total_cmp(&key) {
                Ordering::Less => true,
                Ordering::Equal => *t > tiebreak,
                Ordering::Greater => false,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn votes(ups: u64, downs: u64) -> Votes {
        Votes { ups, downs }
    }

    #[test]
    fn wilson_lower_bound_at_95_percent() {
        // Reference values from the closed form (z = 1.959964).
        let close = |a: f64, b: f64| (a - b).abs() < 1e-4;
        assert_eq!(votes(0, 0).best(), 0.0);
        assert_eq!(votes(0, 5).best(), 0.0);
        assert!(close(votes(1, 0).best(), 0.2065), "{}", votes(1, 0).best());
        assert!(
            close(votes(10, 0).best(), 0.7225),
            "{}",
            votes(10, 0).best()
        );
        assert!(close(votes(4, 4).best(), 0.2152), "{}", votes(4, 4).best());
        assert!(
            close(votes(20, 15).best(), 0.4086),
            "{}",
            votes(20, 15).best()
        );
        // More evidence beats a perfect ratio on little of it; more ups beat fewer.
        assert!(votes(10, 1).best() > votes(1, 0).best());
        assert!(votes(4, 0).best() > votes(20, 15).best());
        assert!(votes(100, 0).best() < 1.0);
    }

    #[test]
    fn hot_is_log_score_plus_time() {
        let at = |seconds: i64| bson::DateTime::from_millis(seconds * 1000);
        let t = 1_134_028_003 + 45_000 * 100;
        assert_eq!(votes(0, 0).hot(at(t)), 100.0);
        assert_eq!(votes(10, 0).hot(at(t)), 101.0);
        assert_eq!(votes(0, 10).hot(at(t)), 99.0);
        assert_eq!(votes(1, 0).hot(at(t)), 100.0, "|score| 1 weighs like 0");
        assert_eq!(votes(100, 0).hot(at(t)), 102.0);
        // Ten times the score is worth 12.5 hours.
        assert_eq!(votes(10, 0).hot(at(t)), votes(1, 0).hot(at(t + 45_000)));
        // Newer wins at equal score; a much higher score wins over a little age.
        assert!(votes(5, 0).hot(at(t + 60)) > votes(5, 0).hot(at(t)));
        assert!(votes(50, 0).hot(at(t)) > votes(5, 0).hot(at(t + 3_600)));
        // Rounded to 7 decimals, as Reddit stores it.
        let hot = votes(3, 0).hot(at(t + 1));
        assert_eq!((hot * 1e7).round() / 1e7, hot);
    }

    #[test]
    fn controversy_as_reddit() {
        assert_eq!(votes(0, 0).controversy(), 0.0);
        assert_eq!(votes(5, 0).controversy(), 0.0);
        assert_eq!(votes(0, 5).controversy(), 0.0);
        assert_eq!(votes(3, 3).controversy(), 6.0);
        assert!((votes(20, 15).controversy() - 35_f64.powf(0.75)).abs() < 1e-9);
        assert_eq!(votes(2, 5).controversy(), votes(5, 2).controversy());
        assert!(votes(50, 50).controversy() > votes(60, 20).controversy());
    }

    #[test]
    fn votes_from_directions() {
        assert_eq!(Vote::from_dir(-1).unwrap(), Some(Vote::Down));
        for bad in [2, -2, 100, i64::MIN] {
            assert!(matches!(
                Vote::from_dir(bad),
                Err(Error::InvalidInput { reason: Invalid::Vote { value } }) if value == bad
            ));
        }
        assert!(matches!(
            Vote::try_from(0),
            Err(Error::InvalidInput {
                reason: Invalid::Vote { value: 0 }
            })
        ));
        assert_eq!(Vote::try_from(1).unwrap(), Vote::Up);
        assert_eq!(Vote::of_value(Vote::Down.value()), Some(Vote::Down));
        assert_eq!(Vote::of_value(0), None);
    }

    #[test]
    fn names_parse_as_they_print() {
        for vote in [Vote::Up, Vote::Down] {
            assert_eq!(vote.to_string().parse::<Vote>().unwrap(), vote);
        }
        for sort in Sort::ALL {
            assert_eq!(sort.to_string().parse::<Sort>().unwrap(), sort);
        }
        assert!(matches!(
            "Best".parse::<Sort>(),
            Err(Error::InvalidInput { reason: Invalid::Name { what: "sort", value, .. } }) if value == "Best"
        ));
        assert!(matches!(
            "1".parse::<Vote>(),
            Err(Error::InvalidInput {
                reason: Invalid::Name { what: "vote", .. }
            })
        ));
    }

    #[test]
    fn keys_have_one_zero_and_rank_ties_oldest_first() {
        let old = bson::DateTime::from_millis(0);
        let hot = Sort::Hot.key(votes(0, 0), old);
        assert!(hot < 0.0);
        assert_eq!(Sort::Top.key(votes(2, 2), old).to_bits(), 0.0_f64.to_bits());
        let items = vec![(1.0, 2, "c"), (3.0, 5, "a"), (1.0, 1, "b"), (0.0, 0, "d")];
        let ranked: Vec<&str> = rank_after(items.clone(), None)
            .into_iter()
            .map(|(_, _, t)| t)
            .collect();
        assert_eq!(ranked, ["a", "b", "c", "d"]);
        let rest: Vec<&str> = rank_after(items, Some((1.0, 1)))
            .into_iter()
            .map(|(_, _, t)| t)
            .collect();
        assert_eq!(rest, ["c", "d"]);
    }
}
