//! `Clone` and `Debug` for the crate's types generic over a payload they do not hold (a store
//! or builder keeps only a `PhantomData` of it), written once by [`clone_fields!`] and
//! [`debug_fields!`]: `#[derive(Clone, Debug)]` would ask every payload to be `Clone` and
//! `Debug`.

/// `impl Debug` showing the fields named, in order, under the type's name: what
/// `#[derive(Debug)]` would print, without a `Debug` bound on the type parameter. A trailing
/// `..` marks fields left out (`finish_non_exhaustive`).
///
/// `debug_fields!(FanOutOnReadBuilder<P> { config, retention });`
macro_rules! debug_fields {
    ($type:ident<$param:ident $(: $bound:path)?> { $($field:ident),+ $(,)? }) => {
        impl<$param $(: $bound)?> std::fmt::Debug for $type<$param> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($type))
                    $(.field(stringify!($field), &self.$field))+
                    .finish()
            }
        }
    };
    ($type:ident<$param:ident $(: $bound:path)?> { $($field:ident),+, .. }) => {
        impl<$param $(: $bound)?> std::fmt::Debug for $type<$param> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($type))
                    $(.field(stringify!($field), &self.$field))+
                    .finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use debug_fields;

/// `impl Clone` cloning each field named (all of the type's: a `PhantomData` clones whatever
/// it marks), without a `Clone` bound on the type parameter.
///
/// `clone_fields!(BucketedFanOut<P> { buckets, _payload });`
macro_rules! clone_fields {
    ($type:ident<$param:ident $(: $bound:path)?> { $($field:ident),+ $(,)? }) => {
        impl<$param $(: $bound)?> Clone for $type<$param> {
            fn clone(&self) -> Self {
                Self {
                    $($field: self.$field.clone()),+
                }
            }
        }
    };
}

pub(crate) use clone_fields;
