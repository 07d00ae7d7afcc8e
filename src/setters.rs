//! Builder setters written once: [`builder_setters!`] makes the methods that store their
//! argument in the builder's field of the same name.

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

pub(crate) use builder_setters;
