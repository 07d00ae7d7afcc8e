//! What the graph's reads return: routes, subscriptions, counts, rebuild reports.

use std::fmt;

use bson::{Bson, Document};

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
