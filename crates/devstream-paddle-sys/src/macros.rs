//! The macro that turns one list of fields into every layout this crate declares.
//!
//! `paddle_structs!` takes each struct of `device_ext.h` once, as the Paddle 3.3 header
//! lists it, in header order. A field is written `name: Type,` (in every release since 2.6,
//! with that type), `name: Type [since 3.1],` (added in that release: absent from the 2.6
//! struct), or `name: Type [2.6: OldType],` (present in 2.6 with another type). From that one
//! list it emits:
//!
//! * the 3.3 `#[repr(C)]` struct at the crate root, and its offset table (`AbiField`s: name,
//!   offset, size, the release that added the field);
//! * the same pair for Paddle 2.6 in the `paddle_2_6` module: the fields 2.6 has, in the same
//!   order, with 2.6's types.
//!
//! The 2.6 struct is built by a token muncher (`paddle_2_6_struct!`): a `macro_rules!`
//! repetition cannot leave a field out, so each step moves one field into the accumulated body
//! or drops it. One step per field is one level of macro recursion, hence the crate's
//! `recursion_limit`.
//!
//! [`AbiField`]: crate::AbiField

/// The release that added a field, from its optional note (`[since 3.1]`, `[2.6: T]`, none).
macro_rules! field_since {
    () => {
        "2.6"
    };
    (2.6: $old:ty) => {
        "2.6"
    };
    (since $release:literal) => {
        stringify!($release)
    };
}

/// A field's type in Paddle 2.6: its own, or the one its `[2.6: T]` note names.
macro_rules! type_2_6 {
    ($ty:ty) => {
        $ty
    };
    ($ty:ty, $old:ty) => {
        $old
    };
}

/// Emits the 3.3 structs and offset tables at the call site and their 2.6 counterparts in a
/// `paddle_2_6` module (see the module docs for the field syntax).
macro_rules! paddle_structs {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident, offsets $fields:ident {
            $( $(#[$doc:meta])* $field:ident : $ty:ty $([$($note:tt)*])? , )*
        }
    )*) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Clone, Copy)]
            pub struct $name {
                $( $(#[$doc])* pub $field: $ty, )*
            }

            #[doc = concat!(
                "Every field of [`", stringify!($name), "`] (Paddle 3.3), in header order: the \
                 offsets the header tests compare with `offsetof` in the real `device_ext.h`."
            )]
            pub const $fields: &[$crate::AbiField] = &[$(
                $crate::AbiField {
                    name: stringify!($field),
                    offset: core::mem::offset_of!($name, $field),
                    size: core::mem::size_of::<$ty>(),
                    since: field_since!($($($note)*)?),
                },
            )*];
        )*

        /// The Paddle 2.6 layout (2.6.2 checked), generated from the same field lists: the 3.3
        /// table's stable prefix, then `get_compute_capability`, `get_runtime_version` and
        /// `get_driver_version` without a device argument, no `xccl_get_comm_name`, no BLAS
        /// handles or capture; params without `pir_default_passes`. devstream never reads a 2.x
        /// table beyond the stable prefix; these declarations exist for the header tests.
        pub mod paddle_2_6 {
            use super::*;
            $(
                paddle_2_6_struct!(
                    @munch $name $fields [] []
                    $( $(#[$doc])* $field : $ty $([$($note)*])? , )*
                );
            )*
        }
    };
}

/// One step of the 2.6 struct: moves the first field of the list into the body (with its 2.6
/// type) or drops it (added after 2.6); with no field left, emits the struct and its table.
macro_rules! paddle_2_6_struct {
    (@munch $name:ident $fields:ident [$($body:tt)*] [$($entry:tt)*]) => {
        #[doc = concat!(
            "`", stringify!($name), "` of Paddle 2.6: the fields of [`super::",
            stringify!($name), "`] that 2.6 has, in the same order, with 2.6's types."
        )]
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct $name {
            $($body)*
        }

        #[doc = concat!(
            "Every field of the 2.6 [`", stringify!($name), "`], in header order."
        )]
        pub const $fields: &[$crate::AbiField] = &[$($entry)*];
    };
    (
        @munch $name:ident $fields:ident $body:tt $entries:tt
        $(#[$doc:meta])* $field:ident : $ty:ty [since $release:literal],
        $($rest:tt)*
    ) => {
        paddle_2_6_struct!(@munch $name $fields $body $entries $($rest)*);
    };
    (
        @munch $name:ident $fields:ident [$($body:tt)*] [$($entry:tt)*]
        $(#[$doc:meta])* $field:ident : $ty:ty $([2.6: $old:ty])?,
        $($rest:tt)*
    ) => {
        paddle_2_6_struct!(
            @munch $name $fields
            [$($body)* $(#[$doc])* pub $field: type_2_6!($ty $(, $old)?),]
            [$($entry)* $crate::AbiField {
                name: stringify!($field),
                offset: core::mem::offset_of!($name, $field),
                size: core::mem::size_of::<type_2_6!($ty $(, $old)?)>(),
                since: "2.6",
            },]
            $($rest)*
        );
    };
}
