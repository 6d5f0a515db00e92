//! The function fields of [`C_DeviceInterface`] a host requires, named once.
//!
//! A host checks a plug-in's table against these lists (devstream's loader before it runs
//! anything of the plug-in; its collectives before it offers them), and a test plug-in that
//! leaves one out on purpose clears the same field. Each entry pairs the field's header name
//! with how to read and clear that field, so the name and the field cannot drift apart.

use crate::C_DeviceInterface;

/// One function field of [`C_DeviceInterface`]: its header name, whether a table fills it, and
/// how to clear it.
#[derive(Clone, Copy, Debug)]
pub struct FunctionField {
    /// The field's name in the header (`"set_device"`).
    pub name: &'static str,
    /// Whether `table` fills the field (its pointer is non-null).
    pub is_filled: fn(&C_DeviceInterface) -> bool,
    /// Sets the field to null.
    pub clear: fn(&mut C_DeviceInterface),
}

impl FunctionField {
    /// The names of `fields`, in order.
    pub const fn names<const N: usize>(fields: [FunctionField; N]) -> [&'static str; N] {
        let mut names = [""; N];
        let mut index = 0;
        while index < N {
            names[index] = fields[index].name;
            index += 1;
        }
        names
    }

    /// The names of the `fields` that `table` does not fill, in order.
    pub fn unfilled<'a>(
        fields: &'a [FunctionField],
        table: &'a C_DeviceInterface,
    ) -> impl Iterator<Item = &'static str> + 'a {
        fields
            .iter()
            .filter(move |field| !(field.is_filled)(table))
            .map(|field| field.name)
    }
}

/// The [`FunctionField`]s of the named fields of [`C_DeviceInterface`], in the order given.
macro_rules! function_fields {
    ($($field:ident),+ $(,)?) => {
        [$(FunctionField {
            name: stringify!($field),
            is_filled: |table| table.$field.is_some(),
            clear: |table| table.$field = None,
        }),+]
    };
}

/// The functions Paddle requires of every plug-in (devstream's loader requires the same).
pub const REQUIRED_FUNCTIONS: [FunctionField; 10] = function_fields![
    set_device,
    get_device,
    create_event,
    record_event,
    destroy_event,
    synchronize_event,
    device_memory_allocate,
    device_memory_deallocate,
    get_device_count,
    get_device_list,
];

/// The `xccl_*` functions a plug-in must fill for devstream to offer collectives on it.
pub const REQUIRED_XCCL_FUNCTIONS: [FunctionField; 13] = function_fields![
    xccl_get_unique_id_size,
    xccl_get_unique_id,
    xccl_comm_init_rank,
    xccl_destroy_comm,
    xccl_all_reduce,
    xccl_broadcast,
    xccl_reduce,
    xccl_all_gather,
    xccl_reduce_scatter,
    xccl_group_start,
    xccl_group_end,
    xccl_send,
    xccl_recv,
];
