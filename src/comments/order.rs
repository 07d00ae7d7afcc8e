//! The order of top-level comments in a page, by name.

use std::fmt;

use crate::Result;

/// Which top-level comments come first. Replies always follow their parent in posting order.
///
/// Named `"oldest"` and `"newest"`: `FromStr` parses a request's name (anything else is
/// [`Invalid::Name`](crate::error::Invalid::Name)), `Display` prints it, and serde uses the
/// same text.
///
/// ```
/// use mongo_social::comments::Order;
/// assert_eq!("newest".parse::<Order>().unwrap(), Order::NewestFirst);
/// assert_eq!(Order::OldestFirst.to_string(), "oldest");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Oldest first (the default): the order of a conversation.
    #[default]
    OldestFirst,
    /// Newest first: the order of a feed.
    NewestFirst,
}

impl Order {
    /// The order's name: `"oldest"` or `"newest"`.
    pub fn name(self) -> &'static str {
        match self {
            Order::OldestFirst => "oldest",
            Order::NewestFirst => "newest",
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Order {
    type Err = crate::Error;

    /// `"oldest"` or `"newest"`; anything else is
    /// [`Invalid::Name`](crate::error::Invalid::Name).
    fn from_str(name: &str) -> Result<Order> {
        match name {
            "oldest" => Ok(Order::OldestFirst),
            "newest" => Ok(Order::NewestFirst),
            other => Err(crate::names::unknown("order", other, "oldest, newest")),
        }
    }
}

crate::names::serde_by_name!(Order);
