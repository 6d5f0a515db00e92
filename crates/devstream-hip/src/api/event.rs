//! Events: [`HipApi`]'s part of the raw-call table (`RawEvents`).

use super::*;
use devstream_gpu_common::RawEvents;

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawEvents for HipApi {
    unsafe fn event_create(flags: EventFlags) -> RawResult<RawEvent> {
        let t = table("hipEventCreateWithFlags")?;
        let mut native = sys::hipEventDefault;
        if !flags.timing {
            native |= sys::hipEventDisableTiming;
        }
        if flags.blocking_sync {
            native |= sys::hipEventBlockingSync;
        }
        if flags.interprocess {
            native |= sys::hipEventInterprocess;
        }
        let raw = out(std::ptr::null_mut(), "hipEventCreateWithFlags", |raw| {
            // SAFETY: valid out-pointer; the caller selected the device.
            unsafe { (t.hipEventCreateWithFlags)(raw, native) }
        })?;
        Ok(RawEvent(raw))
    }

    unsafe fn event_destroy(e: RawEvent) -> RawResult {
        call("hipEventDestroy", |t| {
            // SAFETY: the caller owns the event.
            unsafe { (t.hipEventDestroy)(event(e)) }
        })
    }

    #[inline]
    unsafe fn event_record(e: RawEvent, s: RawStream) -> RawResult {
        call("hipEventRecord", |t| {
            // SAFETY: live event and stream (caller).
            unsafe { (t.hipEventRecord)(event(e), stream(s)) }
        })
    }

    #[inline]
    unsafe fn event_query(e: RawEvent) -> RawResult {
        call("hipEventQuery", |t| {
            // SAFETY: live event (caller).
            unsafe { (t.hipEventQuery)(event(e)) }
        })
    }

    #[inline]
    unsafe fn event_synchronize(e: RawEvent) -> RawResult {
        call("hipEventSynchronize", |t| {
            // SAFETY: live event (caller).
            unsafe { (t.hipEventSynchronize)(event(e)) }
        })
    }

    unsafe fn event_elapsed_ms(start: RawEvent, end: RawEvent) -> RawResult<f32> {
        let t = table("hipEventElapsedTime")?;
        out(0f32, "hipEventElapsedTime", |ms| {
            // SAFETY: live events; valid out-pointer.
            unsafe { (t.hipEventElapsedTime)(ms, event(start), event(end)) }
        })
    }
}
