//! The buffer operations every backend with buffers runs, described once.
//!
//! A [`BufferOp`] names one copy or fill with its buffers and byte ranges. Backends build it in
//! their `DeviceStream` copy and fill methods, check it with [`BufferOp::validate`] (the one
//! range rule, through [`check_range`]), and then queue, encode or capture it; a graph keeps the
//! owned form and replays it. The buffer types are parameters: a backend uses references to its
//! own buffer records while validating and [`BufferOp::to_owned`] turns them into the shared
//! handles a queue or a graph keeps.
//!
//! ```
//! use devstream_core::ops::{BufferLen, BufferOp, Transfer};
//! struct Bytes(usize);
//! impl BufferLen for Bytes {
//!     fn byte_len(&self) -> usize {
//!         self.0
//!     }
//! }
//! let (dst, src) = (Bytes(8), Bytes(4));
//! let op: BufferOp<&Bytes, &Bytes, &[u8]> = BufferOp::DeviceToDevice(Transfer {
//!     dst: &dst,
//!     dst_offset: 4,
//!     src: &src,
//!     src_offset: 0,
//!     len: 4,
//! });
//! assert!(op.validate().is_ok());
//! assert_eq!(op.name(), "copy_device_to_device");
//! let fill: BufferOp<&Bytes, &Bytes, &[u8]> = BufferOp::Fill { dst: &src, offset: 1, len: 4, value: 0 };
//! assert!(fill.validate().is_err());
//! ```

use crate::traits::check_range;
use crate::Result;
use std::sync::Arc;

/// A buffer whose size in bytes a [`BufferOp`] checks its ranges against.
pub trait BufferLen {
    /// The buffer's size in bytes.
    fn byte_len(&self) -> usize;
}

impl<T: BufferLen + ?Sized> BufferLen for &T {
    fn byte_len(&self) -> usize {
        (**self).byte_len()
    }
}

impl<T: BufferLen + ?Sized> BufferLen for Arc<T> {
    fn byte_len(&self) -> usize {
        (**self).byte_len()
    }
}

/// A copy between two buffers: `len` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
#[derive(Clone, Debug)]
pub struct Transfer<Dst, Src> {
    /// The buffer written.
    pub dst: Dst,
    /// Where in `dst` the bytes go.
    pub dst_offset: usize,
    /// The buffer read.
    pub src: Src,
    /// Where in `src` the bytes come from.
    pub src_offset: usize,
    /// How many bytes.
    pub len: usize,
}

impl<Dst, Src> Transfer<Dst, Src> {
    /// `len` bytes from `src` at `src_offset` to `dst` at `dst_offset` (the order of the
    /// `DeviceStream` copy methods' arguments).
    pub fn new(dst: Dst, dst_offset: usize, src: Src, src_offset: usize, len: usize) -> Self {
        Transfer {
            dst,
            dst_offset,
            src,
            src_offset,
            len,
        }
    }

    /// The same copy over other handles of its buffers.
    pub fn map<D2, S2>(
        &self,
        dst: impl FnOnce(&Dst) -> D2,
        src: impl FnOnce(&Src) -> S2,
    ) -> Transfer<D2, S2> {
        Transfer {
            dst: dst(&self.dst),
            dst_offset: self.dst_offset,
            src: src(&self.src),
            src_offset: self.src_offset,
            len: self.len,
        }
    }
}

impl<Dst: BufferLen, Src: BufferLen> Transfer<Dst, Src> {
    /// Checks both ranges ([`check_range`]), the destination's first; `op` names the call.
    pub fn validate(&self, op: &'static str) -> Result<()> {
        check_range(op, self.dst_offset, self.len, self.dst.byte_len())?;
        check_range(op, self.src_offset, self.len, self.src.byte_len())
    }
}

/// One copy or fill: `D` is a device buffer, `H` a host (pinned) buffer, `B` the bytes of a
/// copy from a host slice (`&[u8]` while validating, `Arc<[u8]>` once kept).
#[derive(Clone, Debug)]
pub enum BufferOp<D, H, B = Arc<[u8]>> {
    /// Host bytes → device buffer at `offset` (`copy_from_host`).
    CopyFromHost {
        /// The buffer written.
        dst: D,
        /// Where in `dst` the bytes go.
        offset: usize,
        /// The bytes.
        data: B,
    },
    /// Host buffer → device buffer (`copy_host_to_device`).
    HostToDevice(Transfer<D, H>),
    /// Device buffer → host buffer (`copy_device_to_host`).
    DeviceToHost(Transfer<H, D>),
    /// Device buffer → device buffer, possibly the same one (`copy_device_to_device`).
    DeviceToDevice(Transfer<D, D>),
    /// Sets `len` bytes of a buffer from `offset` to `value` (`fill`).
    Fill {
        /// The buffer written.
        dst: D,
        /// The first byte set.
        offset: usize,
        /// How many bytes.
        len: usize,
        /// The value of every byte.
        value: u8,
    },
}

impl<D, H, B: AsRef<[u8]>> BufferOp<D, H, B> {
    /// The name of the `DeviceStream` method this operation is, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            BufferOp::CopyFromHost { .. } => "copy_from_host",
            BufferOp::HostToDevice(_) => "copy_host_to_device",
            BufferOp::DeviceToHost(_) => "copy_device_to_host",
            BufferOp::DeviceToDevice(_) => "copy_device_to_device",
            BufferOp::Fill { .. } => "fill",
        }
    }

    /// How many bytes the operation writes.
    pub fn len(&self) -> usize {
        match self {
            BufferOp::CopyFromHost { data, .. } => data.as_ref().len(),
            BufferOp::HostToDevice(t) => t.len,
            BufferOp::DeviceToHost(t) => t.len,
            BufferOp::DeviceToDevice(t) => t.len,
            BufferOp::Fill { len, .. } => *len,
        }
    }

    /// Whether the operation writes no byte (it is then valid and does nothing).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Turns the buffers and bytes into owned handles (what a queue or a graph keeps).
    pub fn to_owned<D2, H2, B2>(
        &self,
        device: impl Fn(&D) -> D2,
        host: impl Fn(&H) -> H2,
        bytes: impl FnOnce(&[u8]) -> B2,
    ) -> BufferOp<D2, H2, B2> {
        match self {
            BufferOp::CopyFromHost { dst, offset, data } => BufferOp::CopyFromHost {
                dst: device(dst),
                offset: *offset,
                data: bytes(data.as_ref()),
            },
            BufferOp::HostToDevice(t) => BufferOp::HostToDevice(t.map(&device, &host)),
            BufferOp::DeviceToHost(t) => BufferOp::DeviceToHost(t.map(&host, &device)),
            BufferOp::DeviceToDevice(t) => BufferOp::DeviceToDevice(t.map(&device, &device)),
            BufferOp::Fill {
                dst,
                offset,
                len,
                value,
            } => BufferOp::Fill {
                dst: device(dst),
                offset: *offset,
                len: *len,
                value: *value,
            },
        }
    }
}

impl<D: BufferLen, H: BufferLen, B: AsRef<[u8]>> BufferOp<D, H, B> {
    /// Checks every range of the operation against its buffers ([`check_range`]): the
    /// destination's first, then the source's. An operation of no bytes at an offset within
    /// (or at the end of) its buffers is valid.
    pub fn validate(&self) -> Result<()> {
        let name = self.name();
        match self {
            BufferOp::CopyFromHost { dst, offset, data } => {
                check_range(name, *offset, data.as_ref().len(), dst.byte_len())
            }
            BufferOp::HostToDevice(t) => t.validate(name),
            BufferOp::DeviceToHost(t) => t.validate(name),
            BufferOp::DeviceToDevice(t) => t.validate(name),
            BufferOp::Fill {
                dst, offset, len, ..
            } => check_range(name, *offset, *len, dst.byte_len()),
        }
    }
}

/// Writes the five buffer methods of a [`DeviceStream`](crate::DeviceStream) implementation
/// (`copy_from_host`, the three copies and `fill`) for a backend that runs each as one
/// [`BufferOp`]: every method builds its operation over the buffers' records (the handle field
/// named after `record:`) and evaluates `$submit` with it bound to `$op` and the stream to `$self`.
///
/// ```ignore
/// impl DeviceStream for MyStream {
///     // ...
///     devstream_core::buffer_methods! {
///         buffer: MyBuffer, host: MyHostBuffer, record: inner,
///         |self, op| self.queue_buffer_op(op)
///     }
/// }
/// ```
#[macro_export]
macro_rules! buffer_methods {
    (
        buffer: $buffer:ty, host: $host:ty, record: $record:tt,
        |$self:ident, $op:ident| $submit:expr
    ) => {
        fn copy_from_host(
            &$self,
            dst: &$buffer,
            dst_offset: usize,
            src: &[u8],
        ) -> $crate::Result<()> {
            let $op = $crate::ops::BufferOp::CopyFromHost {
                dst: &dst.$record,
                offset: dst_offset,
                data: src,
            };
            $submit
        }

        $crate::buffer_methods! {
            @copies record: $record, |$self, $op| $submit,
            copy_host_to_device: HostToDevice($buffer, $host),
            copy_device_to_host: DeviceToHost($host, $buffer),
            copy_device_to_device: DeviceToDevice($buffer, $buffer),
        }

        fn fill(&$self, dst: &$buffer, offset: usize, len: usize, value: u8) -> $crate::Result<()> {
            let $op = $crate::ops::BufferOp::Fill {
                dst: &dst.$record,
                offset,
                len,
                value,
            };
            $submit
        }
    };
    (
        @copies record: $record:tt, |$self:ident, $op:ident| $submit:expr,
        $($method:ident: $variant:ident($dst:ty, $src:ty),)+
    ) => {$(
        fn $method(
            &$self,
            dst: &$dst,
            dst_offset: usize,
            src: &$src,
            src_offset: usize,
            len: usize,
        ) -> $crate::Result<()> {
            let $op = $crate::ops::BufferOp::$variant($crate::ops::Transfer::new(
                &dst.$record, dst_offset, &src.$record, src_offset, len,
            ));
            $submit
        }
    )+};
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    struct Bytes(usize);
    impl BufferLen for Bytes {
        fn byte_len(&self) -> usize {
            self.0
        }
    }

    type Borrowed<'a> = BufferOp<&'a Bytes, &'a Bytes, &'a [u8]>;

    #[test]
    fn every_range_is_checked_destination_first() {
        let (small, big) = (Bytes(4), Bytes(16));
        let ok: Borrowed<'_> = BufferOp::HostToDevice(Transfer {
            dst: &big,
            dst_offset: 12,
            src: &small,
            src_offset: 0,
            len: 4,
        });
        assert!(ok.validate().is_ok());
        let bad_src: Borrowed<'_> = BufferOp::DeviceToHost(Transfer {
            dst: &big,
            dst_offset: 0,
            src: &small,
            src_offset: 1,
            len: 4,
        });
        match bad_src.validate() {
            Err(Error::InvalidArgument(message)) => {
                assert!(
                    message.starts_with("copy_device_to_host: range 1..1+4"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        let overflow: Borrowed<'_> = BufferOp::Fill {
            dst: &big,
            offset: usize::MAX,
            len: 2,
            value: 0,
        };
        assert!(overflow.validate().is_err());
        let bytes: Borrowed<'_> = BufferOp::CopyFromHost {
            dst: &small,
            offset: 4,
            data: &[],
        };
        assert!(bytes.validate().is_ok() && bytes.is_empty());
    }

    #[test]
    fn to_owned_keeps_every_field() {
        let buffer = Bytes(8);
        let op: Borrowed<'_> = BufferOp::CopyFromHost {
            dst: &buffer,
            offset: 2,
            data: &[1, 2, 3],
        };
        let owned: BufferOp<usize, usize> = op.to_owned(|d| d.0, |h| h.0, |data| Arc::from(data));
        match owned {
            BufferOp::CopyFromHost { dst, offset, data } => {
                assert_eq!((dst, offset, &data[..]), (8, 2, &[1, 2, 3][..]))
            }
            other => panic!("{other:?}"),
        }
    }
}
