//! Which `device_ext.h` layout a plug-in filled. Every 3.x release has the same params size and
//! Paddle's own check accepts when either size matches, so the sizes a plug-in accepts tell the
//! table only when an offer is built to pin it: devstream makes a sequence of offers, in zeroed
//! buffers far larger than any layout, and reads a field beyond the stable prefix only from a
//! table identified exactly as the 3.3 one.

use super::plugin_error;
use crate::sys::*;
use devstream_core::Result;
use std::path::Path;

/// What devstream knows about the table a plug-in filled, from the offer it accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// What [`crate::PluginInfo::layout`] reports.
    pub(crate) name: &'static str,
    /// The layout, when the accepted offer identifies the table exactly.
    pub(crate) exact: Option<AbiLayout>,
    /// The most bytes of the table the plug-in may have filled.
    pub(crate) max_interface_size: usize,
}

impl Negotiated {
    /// Bytes of the plug-in's table devstream copies and reads: a field beyond
    /// [`STABLE_PREFIX_SIZE`] only from a table known to be exactly the 3.3 layout.
    pub(crate) fn readable(&self) -> usize {
        self.exact
            .map_or(STABLE_PREFIX_SIZE, |layout| layout.readable)
    }
}

/// One call of `InitPlugin`: the two sizes presented, and what an acceptance tells.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Offer {
    pub(crate) params_size: usize,
    pub(crate) interface_size: usize,
    pub(crate) negotiated: Negotiated,
}

/// A size no `CustomRuntimeParams` or `C_DeviceInterface` has: an offer presenting it for one
/// of the two can be accepted only through the other.
const NO_SIZE: usize = 0;

/// The offers, in order. Paddle's `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` accepts when *either*
/// size matches the plug-in's header (`&&` in its refusal test), and every 3.x release has
/// 96-byte params: a plug-in that accepts Paddle 3.3's own pair (96, 1128) may have filled a
/// 3.0, 3.1 or 3.2 table. So devstream first asks questions whose acceptance identifies the
/// table:
///
/// 1. params size 0 and the whole 16 KiB buffer as the table: accepted only by a plug-in that
///    checks neither size (or only "at least"): its table is not identified;
/// 2. params size 0 and each known table size, newest (largest) first: accepted (with
///    Paddle's check) only by a plug-in whose table is exactly that size; a plug-in that
///    fills only what fits the host's table (accepting any size up to its own) gets the
///    newest layout it knows;
/// 3. each params size (88, 96) with the 16 KiB table: a plug-in that checks the params size
///    only: the family is known (2.x or 3.x), the table is not;
/// 4. the exact pairs, newest first: a plug-in that needs both sizes to match and refused
///    the params size with a table of any size in step 3.
///
/// Only an offer of steps 2 and 4 identifies the table; devstream reads beyond the stable
/// prefix only when that table is the 3.3 one. Every refusal must leave both buffers as they
/// were before the next offer is made.
pub(crate) fn offers() -> Vec<Offer> {
    let unidentified = |name, max_interface_size| Negotiated {
        name,
        exact: None,
        max_interface_size,
    };
    let exact = |layout: AbiLayout| Negotiated {
        name: layout.name,
        exact: Some(layout),
        max_interface_size: layout.interface_size,
    };
    let mut offers = vec![Offer {
        params_size: NO_SIZE,
        interface_size: INTERFACE_ALLOCATION,
        negotiated: unidentified(
            "unidentified (InitPlugin checks neither size)",
            MAX_KNOWN_INTERFACE_SIZE,
        ),
    }];
    offers.extend(KNOWN_LAYOUTS.iter().rev().map(|&layout| Offer {
        params_size: NO_SIZE,
        interface_size: layout.interface_size,
        negotiated: exact(layout),
    }));
    offers.push(Offer {
        params_size: PARAMS_SIZE_2,
        interface_size: INTERFACE_ALLOCATION,
        negotiated: unidentified(
            "Paddle 2.x (table size not identified)",
            LAYOUT_PADDLE_2_6.interface_size,
        ),
    });
    offers.push(Offer {
        params_size: PARAMS_SIZE_3,
        interface_size: INTERFACE_ALLOCATION,
        negotiated: unidentified(
            "Paddle 3.x (table size not identified)",
            MAX_KNOWN_INTERFACE_SIZE,
        ),
    });
    offers.extend(KNOWN_LAYOUTS.iter().rev().map(|&layout| Offer {
        params_size: layout.params_size,
        interface_size: layout.interface_size,
        negotiated: exact(layout),
    }));
    offers
}

/// What `InitPlugin` wrote, with the offer it accepted.
pub(super) struct Accepted {
    pub(super) negotiated: Negotiated,
    pub(super) params: Box<[u64]>,
    pub(super) interface: Box<[u64]>,
}

/// Makes each offer in turn until the plug-in accepts one (writes its version).
/// `InitPlugin` is called again only after a refusal that changed nothing (Paddle's
/// `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` returns before touching anything), so a plug-in's
/// entry point does its work at most once.
pub(super) fn negotiate(path: &Path, init: InitPluginFn) -> Result<Accepted> {
    let offers = offers();
    for offer in &offers {
        let mut params = vec![0u64; PARAMS_ALLOCATION / 8].into_boxed_slice();
        let mut interface = vec![0u64; INTERFACE_ALLOCATION / 8].into_boxed_slice();
        let params_ptr = params.as_mut_ptr().cast::<CustomRuntimeParams>();
        let interface_ptr = interface.as_mut_ptr().cast::<C_DeviceInterface>();
        // SAFETY: both buffers are zeroed, 8-byte aligned and far larger than the structs.
        unsafe {
            (*interface_ptr).size = offer.interface_size;
            (*params_ptr).size = offer.params_size;
            (*params_ptr).interface = interface_ptr;
        }
        let offered = (params.clone(), interface.clone());
        // SAFETY: `init` is the plug-in's `InitPlugin`; it gets params and a table with room
        // well beyond every known layout (the sizes presented never exceed the buffers).
        unsafe { init(params_ptr) };
        // SAFETY: reading back our own buffer.
        let version = unsafe { (*params_ptr).version };
        if version == CustomRuntimeVersion::default()
            && (offered.0 != params || offered.1 != interface)
        {
            // Paddle's check refuses before touching anything; a plug-in that wrote and then
            // refused may have done more (allocated, started threads): not offered again.
            return Err(plugin_error(
                path,
                format!(
                    "InitPlugin wrote into the buffers without accepting the offer of \
                     {}-byte params and a {}-byte table (no runtime version); a refusal must \
                     change nothing, so it is not called again",
                    offer.params_size, offer.interface_size
                ),
            ));
        }
        if version != CustomRuntimeVersion::default() {
            // SAFETY: as above.
            let kept_interface = unsafe { (*params_ptr).interface };
            if kept_interface != interface_ptr {
                return Err(plugin_error(
                    path,
                    "InitPlugin replaced CustomRuntimeParams::interface with a table of its own; \
                     the plug-in must fill the table the host provides (as Paddle requires)",
                ));
            }
            return Ok(Accepted {
                negotiated: offer.negotiated,
                params,
                interface,
            });
        }
    }
    let known: Vec<String> = KNOWN_LAYOUTS
        .iter()
        .map(|l| {
            format!(
                "{} ({}-byte params, {}-byte table)",
                l.name, l.params_size, l.interface_size
            )
        })
        .collect();
    Err(plugin_error(
        path,
        format!(
            "InitPlugin accepted none of the known device_ext.h layouts (wrote no runtime \
             version in {} offers covering {}): it was built against a header devstream does \
             not know",
            offers.len(),
            known.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_offers_that_pin_the_table_size_identify_it() {
        let offers = offers();
        assert_eq!(
            offers.len(),
            1 + KNOWN_LAYOUTS.len() + 2 + KNOWN_LAYOUTS.len()
        );
        for offer in &offers {
            assert!(offer.interface_size <= INTERFACE_ALLOCATION);
            assert!(offer.params_size <= PARAMS_ALLOCATION);
            let known_table = KNOWN_LAYOUTS
                .iter()
                .find(|l| l.interface_size == offer.interface_size);
            match offer.negotiated.exact {
                Some(layout) => {
                    assert_eq!(Some(&layout), known_table, "{offer:?}");
                    assert_eq!(offer.negotiated.max_interface_size, layout.interface_size);
                }
                None => {
                    assert!(known_table.is_none(), "{offer:?}");
                    assert_eq!(offer.negotiated.readable(), STABLE_PREFIX_SIZE);
                }
            }
        }
        // Nothing is offered with a known params size before every table-only offer.
        let first_params = offers
            .iter()
            .position(|o| o.params_size != NO_SIZE)
            .unwrap();
        assert!(offers[..first_params]
            .iter()
            .all(|o| o.params_size == NO_SIZE));
        assert_eq!(first_params, 1 + KNOWN_LAYOUTS.len());
        // Only an exactly identified 3.3 table is read beyond the prefix.
        for offer in &offers {
            let beyond = offer.negotiated.readable() > STABLE_PREFIX_SIZE;
            assert_eq!(beyond, offer.negotiated.exact == Some(LAYOUT_PADDLE_3_3));
        }
    }
}
