//! Hang diagnosis for runs on machines without a debugger (the GPU machine has no gdb):
//! `DEVSTREAM_TEST_STACKS_AFTER=SECONDS` makes the test process print the user-space stack of
//! every thread, with its name and kernel wait channel, once SECONDS have passed since the
//! first test started, and then exit with status 98.
//!
//! Each thread prints its own stack from a `SIGUSR1` handler. That handler allocates, which is
//! not async-signal-safe: a thread interrupted inside the allocator may never print. The dump
//! moves on after two seconds per thread, so one such thread costs its own stack, not the dump.
//! Diagnosis only: the variable is never set by the suite or CI.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::Duration;

/// Set by the signal handler when it has printed its thread's stack.
static PRINTED: AtomicBool = AtomicBool::new(false);

/// Starts the watchdog once per process when `DEVSTREAM_TEST_STACKS_AFTER` is set.
pub fn arm() {
    static ARMED: Once = Once::new();
    ARMED.call_once(|| {
        let Some(after) = std::env::var("DEVSTREAM_TEST_STACKS_AFTER")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("stacks-watchdog".into())
            .spawn(move || {
                std::thread::sleep(Duration::from_secs(after));
                dump();
                std::process::exit(98);
            });
    });
}

/// Writes `text` to the process's standard error, past the test harness's output capture.
fn write_stderr(text: &str) {
    let mut bytes = text.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice; fd 2 is the process's standard error.
        let written = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if written <= 0 {
            return;
        }
        bytes = &bytes[written as usize..];
    }
}

extern "C" fn print_own_stack(_signal: libc::c_int) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let backtrace = std::backtrace::Backtrace::force_capture();
    write_stderr(&format!("--- stack of thread {tid} ---\n{backtrace}\n"));
    PRINTED.store(true, Ordering::Release);
}

fn dump() {
    // SAFETY: a plain C handler that touches no state of the interrupted code but the
    // allocator (see the module documentation); installed once, never removed.
    unsafe {
        libc::signal(
            libc::SIGUSR1,
            print_own_stack as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, own) = unsafe { (libc::getpid(), libc::gettid()) };
    write_stderr(&format!(
        "\n=== DEVSTREAM_TEST_STACKS_AFTER: stacks of process {pid} ===\n"
    ));
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        write_stderr("no /proc/self/task\n");
        return;
    };
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let read = |what: &str| {
            std::fs::read_to_string(task.path().join(what))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        write_stderr(&format!(
            "== thread {tid} '{}' wchan={} syscall={}\n",
            read("comm"),
            read("wchan"),
            read("syscall").split(' ').next().unwrap_or("")
        ));
        if tid == own {
            continue;
        }
        PRINTED.store(false, Ordering::Release);
        // SAFETY: signals a thread of this process; the handler is installed above.
        if unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR1) } != 0 {
            continue;
        }
        for _ in 0..200 {
            if PRINTED.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    write_stderr("=== end of stacks ===\n");
}
