//! Values a request names by text (a sort, an order, a vote, a notification kind): one way to
//! parse them (`FromStr`, failing with [`Invalid::Name`]), one way to print them (`Display`,
//! the same names), and serde through the same text.

use crate::error::{Error, Invalid};

/// [`Invalid::Name`] for `value`, which is not one of the names of `what`.
pub(crate) fn unknown(what: &'static str, value: &str, expected: &'static str) -> Error {
    Error::InvalidInput {
        reason: Invalid::Name {
            what,
            value: value.to_owned(),
            expected,
        },
    }
}

/// `Serialize` as the value's `Display` text and `Deserialize` through its `FromStr`, so a JSON
/// body, a query string or a path segment names it as `Display` prints it.
macro_rules! serde_by_name {
    ($type:ty) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(
                &self,
                serializer: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> std::result::Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use serde_by_name;
