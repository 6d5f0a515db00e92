//! Watching the main thread: the operation log printed after a finding, the watchdog that
//! aborts on a hang and releases the flags a blocked operation may wait for, and [`step`], which
//! runs one watched operation.

use super::*;

/// `DEVSTREAM_FUZZ_TRACE=1`: every input's operations are printed when the next one starts,
/// each with its answer, and the plug-in's misbehaviours and re-entries among them.
pub(crate) fn trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("DEVSTREAM_FUZZ_TRACE").is_some_and(|v| v == "1"))
}

/// Whether streams also wait for completions (an event's, a stream's, a kept one) as operations
/// of their own: on, unless `DEVSTREAM_FUZZ_EXTENDED=0`, which decodes those bytes as the
/// operations they stood for before (how the committed inputs found with it off decode as
/// found; they still make valid, different programs with it on). It was
/// kept off while the finding it led to was open (a stream's synchronize waited for a
/// completion recorded before another stream began a capture for as long as that capture
/// lasted; fixed by resolving such a completion from its nudge).
pub(crate) fn extended() -> bool {
    static EXTENDED: OnceLock<bool> = OnceLock::new();
    *EXTENDED.get_or_init(|| std::env::var_os("DEVSTREAM_FUZZ_EXTENDED").is_none_or(|v| v != "0"))
}

pub(crate) fn print_log() {
    if let Ok(progress) = PROGRESS.try_lock() {
        for line in &progress.log {
            eprintln!("  {line}");
        }
        if let Some((op, since)) = &progress.op {
            eprintln!("  running: {op} for {:?}", since.elapsed());
        }
    }
}

pub(crate) fn watch() {
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let running = lock(&PROGRESS)
            .op
            .as_ref()
            .map(|(op, since)| (op.clone(), since.elapsed()));
        let Some((op, elapsed)) = running else {
            continue;
        };
        if elapsed > RELEASE_AFTER {
            release_flags();
            if let Some(instance) = *lock(&CURRENT) {
                instance.release_never();
            }
        }
        if elapsed > WATCHDOG {
            eprintln!("==== devstream-plugin fuzz: HANG: {op} for {elapsed:?}");
            print_log();
            print_threads();
            std::process::abort();
        }
    }
}

/// `DEVSTREAM_FUZZ_GDB=1`: a hang prints every thread's stack (gdb attaches to the process).
pub(crate) fn print_threads() {
    if std::env::var_os("DEVSTREAM_FUZZ_GDB").is_none_or(|v| v != "1") {
        return;
    }
    let pid = std::process::id().to_string();
    // gdb writes straight to this process's output: a pipe read by this thread would fill while
    // gdb holds the thread stopped.
    let stacks = std::process::Command::new("gdb")
        .args(["-p", &pid, "-batch", "-ex", "thread apply all bt 40"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::inherit())
        .status();
    if let Err(error) = stacks {
        eprintln!("cannot run gdb: {error}");
    }
}

pub(crate) fn release_flags() {
    for (flag, value) in lock(&FLAGS).iter() {
        if flag.get() < *value {
            flag.set(*value);
        }
    }
}

pub(crate) fn note_wait(flag: &PluginFlag, value: u32) {
    let mut flags = lock(&FLAGS);
    match flags.iter_mut().find(|(f, _)| f.id() == flag.id()) {
        Some((_, highest)) => *highest = (*highest).max(value),
        None => flags.push((flag.clone(), value)),
    }
}

/// Adds `line` to the operations printed after a finding (only while [`trace`] is on: the
/// plug-in notes what it does inside the operations).
pub(crate) fn note(line: impl FnOnce() -> String) {
    if trace() {
        let line = line();
        lock(&PROGRESS).log.push(format!("    {line}"));
    }
}

/// Runs `body` as the operation `name` (watched); with [`trace`] on, its answer is noted.
pub(crate) fn step<T: std::fmt::Debug>(name: impl Into<String>, body: impl FnOnce() -> T) -> T {
    let name = name.into();
    {
        let mut progress = lock(&PROGRESS);
        progress.log.push(name.clone());
        progress.op = Some((name, Instant::now()));
    }
    let out = body();
    lock(&PROGRESS).op = None;
    note(|| {
        let mut answer = format!("-> {out:?}");
        answer.truncate(200);
        answer
    });
    out
}
