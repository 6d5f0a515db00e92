//! Events: [`CudaApi`]'s part of the raw-call table (`RawEvents`).

use super::*;
use devstream_gpu_common::RawEvents;

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawEvents for CudaApi {
    unsafe fn event_create(flags: EventFlags) -> RawResult<RawEvent> {
        let mut native = 0u32;
        if !flags.timing {
            native |= sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        }
        if flags.blocking_sync {
            native |= sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        }
        if flags.interprocess {
            native |= sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32;
        }
        let raw = out(std::ptr::null_mut(), "cuEventCreate", |raw| {
            // SAFETY: valid out-pointer; a context is current (caller).
            unsafe { sys::cuEventCreate(raw, native) }
        })?;
        Ok(RawEvent(raw.cast()))
    }

    unsafe fn event_destroy(e: RawEvent) -> RawResult {
        ok(
            // SAFETY: the caller owns the event.
            unsafe { sys::cuEventDestroy_v2(event(e)) },
            "cuEventDestroy",
        )
    }

    #[inline]
    unsafe fn event_record(e: RawEvent, s: RawStream) -> RawResult {
        ok(
            // SAFETY: live event and stream of one context (caller).
            unsafe { sys::cuEventRecord(event(e), stream(s)) },
            "cuEventRecord",
        )
    }

    #[inline]
    unsafe fn event_query(e: RawEvent) -> RawResult {
        // SAFETY: live event (caller).
        ok(unsafe { sys::cuEventQuery(event(e)) }, "cuEventQuery")
    }

    #[inline]
    unsafe fn event_synchronize(e: RawEvent) -> RawResult {
        ok(
            // SAFETY: live event (caller).
            unsafe { sys::cuEventSynchronize(event(e)) },
            "cuEventSynchronize",
        )
    }

    unsafe fn event_elapsed_ms(start: RawEvent, end: RawEvent) -> RawResult<f32> {
        let mut ms = 0f32;
        if support().elapsed_v1 {
            ok(
                // SAFETY: live events, valid out-pointer.
                unsafe { sys::cuEventElapsedTime(&mut ms, event(start), event(end)) },
                "cuEventElapsedTime",
            )?;
        } else {
            ok(
                // SAFETY: as above; the loader requires one of the two variants.
                unsafe { sys::cuEventElapsedTime_v2(&mut ms, event(start), event(end)) },
                "cuEventElapsedTime",
            )?;
        }
        Ok(ms)
    }
}
