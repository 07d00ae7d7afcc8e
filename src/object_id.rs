//! The crate's ids over an `ObjectId` ([`crate::inbox::MessageId`], [`crate::feed::PostId`]),
//! written once by [`object_id_type!`]: a fresh one, its default, its text and its parse.

/// A public `Copy` id type over an `ObjectId`, stored as the bare `ObjectId`
/// (`#[serde(transparent)]`), with `new` (a fresh id, documented where `fn new;` stands),
/// `Default` (a fresh id), `Display` (its 24 hex digits) and `FromStr` (from them).
macro_rules! object_id_type {
    ($(#[$meta:meta])* $name:ident; $(#[$new_meta:meta])* fn new;) => {
        $(#[$meta])*
        #[derive(
            Clone,
            Copy,
            Debug,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub bson::oid::ObjectId);

        impl $name {
            $(#[$new_meta])*
            pub fn new() -> Self {
                Self(bson::oid::ObjectId::new())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = bson::oid::Error;

            fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
                bson::oid::ObjectId::parse_str(s).map(Self)
            }
        }
    };
}

pub(crate) use object_id_type;
