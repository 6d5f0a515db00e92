//! Device addresses for Paddle: a reserved, never-mapped range of virtual addresses and the
//! ordered map that turns `ptr + offset` back into (allocation, offset).
//!
//! Paddle's allocator takes the `void*` that `device_memory_allocate` writes, carves chunks out
//! of it with pointer arithmetic, and hands `base + offset` back to every copy and memset. A
//! devstream buffer has no such address (a wgpu buffer has none at all; a CPU buffer's storage
//! is private to the backend), so every allocation gets one from [`AddressSpace`]: a range
//! reserved with `mmap(PROT_NONE)`, which nothing ever maps, so that a stray host dereference
//! faults instead of touching memory, and no allocation of anyone else can ever share an
//! address with ours. An address that is not inside a live allocation is an error, never a
//! guess.

use std::collections::BTreeMap;

/// Alignment of every address handed out (what CUDA's allocator guarantees).
pub const ALIGN: usize = 256;

/// Reservation sizes tried in order: the first the kernel grants is used.
const RESERVATION_SIZES: [usize; 4] = [1 << 40, 1 << 38, 1 << 36, 1 << 34];

/// One live allocation in the map.
#[derive(Debug)]
pub struct Entry<T> {
    /// Bytes the caller asked for.
    pub len: usize,
    /// Bytes of address space taken (`len` rounded up to [`ALIGN`], at least [`ALIGN`]).
    pub span: usize,
    /// What the caller stored with it.
    pub value: T,
}

/// A reserved range of addresses and the allocations placed in it.
#[derive(Debug)]
pub struct AddressSpace<T> {
    base: usize,
    size: usize,
    /// Where the next search starts (next fit: freed addresses are reused late, so a stale
    /// pointer is more likely to be caught as outside every live allocation).
    cursor: usize,
    live: BTreeMap<usize, Entry<T>>,
    /// Whether `base..base+size` is an `mmap` reservation this value must unmap.
    mapped: bool,
}

/// Rounds `n` up to a multiple of [`ALIGN`] (at least one).
fn span_of(len: usize) -> Option<usize> {
    let n = len.max(1);
    n.checked_add(ALIGN - 1).map(|n| n / ALIGN * ALIGN)
}

impl<T> AddressSpace<T> {
    /// Reserves a range of never-mapped addresses from the kernel (`mmap(PROT_NONE,
    /// MAP_NORESERVE)`, 1 TiB or the largest of 256, 64, 16 GiB that is granted).
    pub fn reserve() -> Option<AddressSpace<T>> {
        for size in RESERVATION_SIZES {
            // SAFETY: an anonymous, private, inaccessible mapping at an address the kernel
            // chooses: it cannot alias any existing memory.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if ptr != libc::MAP_FAILED && !ptr.is_null() {
                let base = ptr as usize;
                // Start at an aligned address inside the reservation.
                let aligned = base.div_ceil(ALIGN) * ALIGN;
                return Some(AddressSpace {
                    base: aligned,
                    size: size - (aligned - base),
                    cursor: aligned,
                    live: BTreeMap::new(),
                    mapped: aligned == base,
                });
            }
        }
        None
    }

    /// An address space over `base..base + size` that this value does not own (for tests:
    /// addresses are only compared, never dereferenced).
    pub fn over(base: usize, size: usize) -> AddressSpace<T> {
        let aligned = base.div_ceil(ALIGN) * ALIGN;
        AddressSpace {
            base: aligned,
            size: size.saturating_sub(aligned - base),
            cursor: aligned,
            live: BTreeMap::new(),
            mapped: false,
        }
    }

    /// The first address of the range.
    pub fn base(&self) -> usize {
        self.base
    }

    /// Bytes of the range.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Number of live allocations.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Sum of the lengths of the live allocations.
    pub fn bytes_live(&self) -> usize {
        self.live.values().map(|e| e.len).sum()
    }

    /// The first free, aligned gap of `span` bytes at or after `from` and before `end`.
    fn find_gap(&self, from: usize, end: usize, span: usize) -> Option<usize> {
        let mut start = from;
        // The allocation that may cover `from`.
        if let Some((&a, e)) = self.live.range(..from).next_back() {
            start = start.max(a + e.span);
        }
        for (&a, e) in self.live.range(from..) {
            if a >= start && a - start >= span {
                break;
            }
            start = start.max(a + e.span);
        }
        (start.checked_add(span)? <= end).then_some(start)
    }

    /// Places an allocation of `len` bytes and returns its address, or `None` when the range
    /// has no gap large enough.
    pub fn insert(&mut self, len: usize, value: T) -> Option<usize> {
        let span = span_of(len)?;
        let end = self.base + self.size;
        let addr = self
            .find_gap(self.cursor, end, span)
            .or_else(|| self.find_gap(self.base, end, span))?;
        self.live.insert(addr, Entry { len, span, value });
        self.cursor = addr + span;
        Some(addr)
    }

    /// Records an allocation at an address chosen elsewhere (host memory handed out as is):
    /// `false` if `[addr, addr + len)` (at least one byte) overlaps a live allocation or wraps.
    pub fn insert_at(&mut self, addr: usize, len: usize, value: T) -> bool {
        let span = len.max(1);
        let Some(end) = addr.checked_add(span) else {
            return false;
        };
        if let Some((&a, e)) = self.live.range(..=addr).next_back() {
            if a + e.span > addr {
                return false;
            }
        }
        if self.live.range(addr..end).next().is_some() {
            return false;
        }
        self.live.insert(addr, Entry { len, span, value });
        true
    }

    /// Removes the allocation that starts exactly at `addr`.
    pub fn remove(&mut self, addr: usize) -> Option<Entry<T>> {
        self.live.remove(&addr)
    }

    /// The allocation holding `[addr, addr + len)` whole, with the offset of `addr` in it.
    /// `len` 0 still needs `addr` to lie inside (or at the end of) a live allocation.
    pub fn find(&self, addr: usize, len: usize) -> Option<(usize, &Entry<T>, usize)> {
        let (&start, entry) = self.live.range(..=addr).next_back()?;
        let offset = addr - start;
        let end = offset.checked_add(len)?;
        (end <= entry.len && (offset < entry.len || len == 0)).then_some((start, entry, offset))
    }
}

impl<T> Drop for AddressSpace<T> {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: the reservation this value made in `reserve` and nobody else uses.
            unsafe { libc::munmap(self.base as *mut libc::c_void, self.size) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_aligned_distinct_and_translate_back() {
        let mut space = AddressSpace::over(0x1000_0000, 1 << 20);
        let a = space.insert(10, 'a').unwrap();
        let b = space.insert(1000, 'b').unwrap();
        let c = space.insert(0, 'c').unwrap();
        assert_eq!(a % ALIGN, 0);
        assert_eq!(b % ALIGN, 0);
        assert!(b >= a + 10 && c >= b + 1000);
        let (start, entry, off) = space.find(b + 999, 1).unwrap();
        assert_eq!((start, entry.value, off), (b, 'b', 999));
        assert!(space.find(b + 999, 2).is_none(), "crosses the end");
        assert!(
            space.find(a + 10, 1).is_none(),
            "padding is not the allocation"
        );
        assert!(space.find(a + 10, 0).is_some(), "an empty range at the end");
        assert!(space.find(a - 1, 1).is_none(), "below the first allocation");
        assert!(space.find(usize::MAX, 1).is_none());
        assert_eq!(space.find(c, 0).unwrap().1.value, 'c');
        assert_eq!(space.bytes_live(), 1010);
    }

    #[test]
    fn freed_ranges_are_reused_after_wrapping() {
        let mut space = AddressSpace::over(0, 4 * ALIGN);
        let a = space.insert(ALIGN, 1).unwrap();
        let b = space.insert(ALIGN, 2).unwrap();
        let _c = space.insert(2 * ALIGN, 3).unwrap();
        assert!(space.insert(1, 4).is_none(), "full");
        assert!(space.remove(a).is_some());
        assert!(space.remove(a).is_none());
        assert!(space.find(a, 1).is_none(), "freed");
        assert_eq!(space.insert(ALIGN, 5), Some(a));
        assert!(space.remove(b).is_some());
        assert!(space.insert(2 * ALIGN, 6).is_none(), "no gap of two");
        assert_eq!(space.insert(ALIGN, 7), Some(b));
        assert_eq!(space.live(), 3);
    }

    #[test]
    fn foreign_addresses_are_recorded_without_overlap() {
        let mut space = AddressSpace::over(1 << 20, 1 << 20);
        assert!(space.insert_at(0x1000, 100, 'h'));
        assert!(!space.insert_at(0x1000 + 99, 1, 'x'), "overlaps the end");
        assert!(!space.insert_at(0x0f00, 0x101, 'x'), "overlaps the start");
        assert!(space.insert_at(0x1000 + 100, 0, 'z'), "adjacent, empty");
        assert!(!space.insert_at(usize::MAX, 1, 'x'), "wraps");
        assert_eq!(space.find(0x1000 + 50, 50).unwrap().1.value, 'h');
        assert!(space.find(0x1000 + 50, 51).is_none());
        assert!(space.remove(0x1000).is_some());
    }

    #[test]
    fn huge_lengths_are_refused_not_wrapped() {
        let mut space = AddressSpace::over(ALIGN, 1 << 20);
        assert!(space.insert(usize::MAX, ()).is_none());
        assert!(space.insert(usize::MAX - ALIGN, ()).is_none());
        let a = space.insert(8, ()).unwrap();
        assert!(space.find(a, usize::MAX).is_none());
    }

    #[test]
    fn a_real_reservation_is_never_mapped_memory() {
        let mut space = AddressSpace::<u8>::reserve().expect("mmap reservation");
        assert!(space.size() >= 1 << 34);
        let a = space.insert(4096, 0).unwrap();
        assert!(a >= space.base() && a < space.base() + space.size());
    }
}
