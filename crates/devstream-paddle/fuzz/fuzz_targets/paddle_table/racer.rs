//! The thread that races the input's calls with read-only calls of its own.

use devstream_paddle_sys::*;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

/// A thread that, from its start to the input's clean-up, makes read-only calls (queries,
/// event synchronisation, capture info) on every stream and event handle the input made,
/// live or destroyed since: a destroy or a reuse of a slot racing a use on another thread
/// must leave that use working on a valid object or answering `C_ERROR`, never touching freed
/// memory. Its answers depend on timing, so only their range is checked.
pub(crate) struct Racer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

/// The stream and event handles of the current input (both kinds: each call also gets the
/// other kind's handles).
static RACED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

impl Racer {
    pub(crate) fn start(seed: u64) -> Racer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut state = seed | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as usize
            };
            let mut device = C_Device_st { id: 0 };
            let dev: C_Device = &mut device;
            while !flag.load(Ordering::Acquire) {
                let handles = RACED.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if handles.is_empty() {
                    std::thread::yield_now();
                    continue;
                }
                let h = handles[next() % handles.len()];
                let answer = match next() % 4 {
                    0 => call!(query_stream(dev, h as C_Stream)),
                    1 => call!(query_event(dev, h as C_Event)),
                    2 => call!(synchronize_event(dev, h as C_Event)),
                    _ => {
                        let mut status: C_StreamCaptureStatus = 0;
                        call!(cuda_stream_capture_info(
                            dev,
                            h as C_Stream,
                            &mut status,
                            null_mut(),
                            null_mut(),
                            null_mut(),
                            null_mut(),
                            null_mut()
                        ))
                    }
                };
                assert!(
                    [C_SUCCESS, C_FAILED, C_ERROR].contains(&answer),
                    "a racing call answered {answer:?}"
                );
            }
        });
        Racer { stop, thread }
    }

    /// A handle for the racer to use.
    pub(crate) fn offer(handle: usize) {
        RACED.lock().unwrap_or_else(|p| p.into_inner()).push(handle);
    }

    /// The input is over: no handle of it is used any more.
    pub(crate) fn forget() {
        RACED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        if self.thread.join().is_err() {
            panic!("the racing thread panicked");
        }
    }
}
