//! The strategy enums of the inbox and of the comment store, written once by
//! [`strategy_enum!`]: the strategies, each one's name and the default names of its collections.

/// A store's public strategy enum (`Copy`, comparable, hashable, `#[non_exhaustive]`) with
/// `name()`, `collections()` and `Display`, from a line per strategy: the variant (with its
/// docs), its name and its collections' default names; then, for `collections()`'s doc test, a
/// strategy of the store's module `$module` and its collections.
macro_rules! strategy_enum {
    (
        $(#[$meta:meta])*
        pub enum $strategy:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $name:literal, $collections:expr;)+
        }
        example: $module:literal, $example:ident => [$($example_collection:literal),+];
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $strategy {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $strategy {
            /// The strategy's name, such as the `"fan-out-on-read"` of an inbox or the
            /// `"per-comment"` of a comment store: what `Display` writes.
            pub fn name(self) -> &'static str {
                match self {
                    $($strategy::$variant => $name,)+
                }
            }

            /// The default names of the strategy's collections: what its builder's `collection`
            /// renames, and what `collection_prefix` is put before.
            ///
            /// ```
            #[doc = concat!("use mongo_social::", $module, "::", stringify!($strategy), ";")]
            #[doc = concat!(
                "assert_eq!(",
                stringify!($strategy), "::", stringify!($example), ".collections(), ",
                stringify!([$($example_collection),+]),
                ");"
            )]
            /// ```
            pub fn collections(self) -> &'static [&'static str] {
                match self {
                    $($strategy::$variant => &$collections,)+
                }
            }
        }

        impl std::fmt::Display for $strategy {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

pub(crate) use strategy_enum;
