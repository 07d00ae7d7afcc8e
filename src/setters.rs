//! Builder setters written once: [`builder_setters!`] makes the methods that store their
//! argument in the builder's field of the same name; [`settings!`] makes a settings struct,
//! its `Default` and those setters from one table, each setting named, typed and given its
//! default once.

/// Builder methods that each set the builder's field of the same name to the value given:
/// `/// docs` then `field: Type,` becomes `pub fn field(mut self, field: Type) -> Self`. Led by
/// `in group;`, each sets that field of the builder's field `group` instead (settings the
/// builder hands on whole to what it builds). A setter that does more than store its argument
/// is written out by hand.
macro_rules! builder_setters {
    (in $group:ident; $( $(#[$doc:meta])* $field:ident: $ty:ty ),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $field: $ty) -> Self {
                self.$group.$field = $field;
                self
            }
        )*
    };
    ($( $(#[$doc:meta])* $field:ident: $ty:ty ),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $field: $ty) -> Self {
                self.$field = $field;
                self
            }
        )*
    };
}

/// A settings struct, its `Default` and its [`builder_setters!`] from one table: `/// docs`
/// then `field: Type = default,` becomes the struct's field (with those docs), its value in
/// `Default::default` and the setter `pub fn field(mut self, field: Type) -> Self` of the type
/// named after `set by`: the struct itself, or, led by `in group`, the builder that holds the
/// settings in its field `group`. The attributes before `impl Default;` go on `default`.
macro_rules! settings {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident, fields $field_vis:vis, set by $owner:ident $(in $group:ident)?;
        $(#[$default_meta:meta])*
        impl Default;
        $( $(#[$doc:meta])* $field:ident: $ty:ty = $default:expr ),* $(,)?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$doc])* $field_vis $field: $ty, )*
        }

        impl Default for $name {
            $(#[$default_meta])*
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl $owner {
            $crate::setters::builder_setters! {
                $(in $group;)?
                $( $(#[$doc])* $field: $ty, )*
            }
        }
    };
}

pub(crate) use builder_setters;
pub(crate) use settings;
