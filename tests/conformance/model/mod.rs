//! Model-based property test: random programs of up to 48 operations over up to 4 streams,
//! events and flags, run on each place and checked against a happens-before model.
//!
//! The model keeps a graph of every operation submitted to a stream. Edges: program order on
//! each stream, `wait_event` → the record the event captured at the time of the call,
//! `wait_stream` → the other stream's last operation, `wait_flag` on a stream's signal flag →
//! the write of that value, and gates: `wait_flag` on a flag only the host raises.
//!
//! Checks: every host task runs exactly once and after all its predecessors; a task sees every
//! signal value written before it; `query` (stream or event) is false while its work depends on
//! a closed gate and, when true, all that work has run; `synchronize` returns after all of it.
//! Gating is deterministic (flags the host raises), never sleep-and-hope; a synchronize is only
//! issued after releasing every gate it depends on, so no program can deadlock a correct
//! backend.
//!
//! Across backends ([`random_programs_across_backends_obey_happens_before`]) the odd stream
//! slots live on a place of another backend, and programs also capture a wait on an event of
//! the other backend (with a host function behind it) and launch the graph once or twice: each
//! replay is a task whose predecessor is the record the event captured when the wait was
//! captured.
//!
//! The hostile variant ([`hostile_programs_obey_happens_before`]) adds host functions that call
//! back into devstream: one reads its stream's host buffer (it must see exactly the copy before
//! it in stream order, and never wait for a copy after it); one queries its own stream (false:
//! it is not done) and an event just recorded on another stream (true means every task that
//! event captured has run; recorded on its own stream, it must be true and its synchronize
//! returns); one launches a host function and records an event on another stream (the launched
//! one runs once, after it; the event completes). A call inside a host function may answer a
//! typed error instead. It runs in a child process with short watchdogs, since a broken backend
//! can wedge a place: after a hang the program that hung is reported as it was (shrinking on a
//! wedged place would only mislead).
//!
//! The hostile and across-backend programs also share two host buffers between their streams
//! (across backends, one on each place; `shared.rs`): host functions given one or both
//! (`launch_host_func_with`, in either order) read and rewrite them, and streams write and read
//! them by copies. The model orders a host function given a buffer after every use of it
//! submitted before, and every later copy after the host function; each reader must see the
//! last write submitted before it.

use crate::harness::{
    caps, for_each_place, for_each_place_isolated, not_applicable, within, Log, HANG, PATIENCE,
};
use devstream::{
    Capabilities, CaptureMode, DeviceBuffer, Event, EventFlags, Flag, HostBuffer, Place, Stream,
};
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MAX_STREAMS: usize = 4;
const EVENT_SLOTS: usize = 4;
const GATES: usize = 2;
const MAX_OPS: usize = 48;
const MIN_CASES: u32 = 256;
/// Host buffers shared by the streams of a program (`Op::Given`, `Op::SharedWrite`, `Op::SharedRead`).
const SHARED: usize = 2;

fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(fail(format!($($fmt)+)));
        }
    };
}

fn api<T>(what: &str, result: devstream::Result<T>) -> Result<T, TestCaseError> {
    result.map_err(|e| fail(format!("{what}: unexpected error {e:?}")))
}

mod check;
mod program;
mod run;
mod shared;
mod step;

use program::*;
use run::*;

fn run_program(
    place: &Place,
    caps: Capabilities,
    program: &Program,
    patience: Duration,
    wedged: &Arc<AtomicBool>,
    elide: Option<bool>,
) -> Result<u64, TestCaseError> {
    run_program_across(place, None, caps, program, patience, wedged, elide)
}

/// [`run_program`] with the odd stream slots on `partner`, a place of another backend, when
/// given (`caps` then holds what both places have).
fn run_program_across(
    place: &Place,
    partner: Option<&Place>,
    caps: Capabilities,
    program: &Program,
    patience: Duration,
    wedged: &Arc<AtomicBool>,
    elide: Option<bool>,
) -> Result<u64, TestCaseError> {
    let mut run = Run::new(place, caps, patience, wedged.clone())?;
    run.elide = elide;
    if let Some(partner) = partner {
        run.partner = Some(partner);
        if run.use_flags {
            run.partner_gates = (0..GATES)
                .map(|_| api("Flag::new", Flag::new(partner)))
                .collect::<Result<_, _>>()?;
        }
    }
    let outcome = program
        .ops
        .iter()
        .try_for_each(|op| run.step(op, program.streams));
    // Whatever happened, open every gate so no work stays held.
    for g in run.gates.iter().chain(&run.partner_gates) {
        g.set(u32::MAX);
    }
    outcome?;
    run.finish()?;
    Ok(run.elided)
}

/// The model test with every stream built with `elide_waits(false)`: every wait is native
/// (the other tests use the default, on unless `DEVSTREAM_ELIDE_WAITS=0`).
#[test]
fn random_programs_obey_happens_before_without_elision() {
    for_each_place(|place| run_model_with(place, false, Some(false)).map(drop));
}

/// Wait-heavy random programs with elision on: every program obeys the happens-before model,
/// and every wait a backend elided is one the model finds redundant (had it been issued, it
/// would have ordered no work that was not ordered already). Fails if the backend elided
/// nothing in all programs (the check would prove nothing).
#[test]
fn elided_waits_were_implied() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.host_funcs {
            not_applicable(place, "no host functions to observe the programs");
            return Ok(());
        }
        let wedged = Arc::new(AtomicBool::new(false));
        let total = AtomicU64::new(0);
        let mut runner = TestRunner::new(Config {
            cases: Config::default().cases.max(MIN_CASES),
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&wait_heavy_strategy(), |program| {
            let elided = run_program(place, caps, &program, PATIENCE, &wedged, Some(true))?;
            total.fetch_add(elided, Ordering::Relaxed);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}\non {place}");
        }
        let total = total.into_inner();
        eprintln!("[conformance] elision on {place}: {total} waits elided, each implied");
        assert!(
            total > 0,
            "{place}: no wait was elided in any wait-heavy program"
        );
        Ok(())
    });
}

/// Random programs (≥ 256 per place) checked against the happens-before model.
#[test]
fn random_programs_obey_happens_before() {
    for_each_place(|place| run_model(place, false));
}

/// Random programs whose streams live on two places of different backends (the odd stream
/// slots on a partner place: the first other place under test whose backend differs, custom
/// device types counting as backends), so that events, `wait_event` and `wait_stream` cross
/// backends (≥ 256 per place), checked against the same happens-before model. Gates are a flag
/// on each place raised together; a flag wait on another place's signal is skipped (flags do
/// not cross places).
#[test]
fn random_programs_across_backends_obey_happens_before() {
    for_each_place(|place| {
        let usable = |p: &Place| {
            let c = caps(p);
            c.foreign_waits && c.host_funcs
        };
        if !usable(place) {
            not_applicable(place, "no waits across backends or no host functions");
            return Ok(());
        }
        let Some(partner) = crate::harness::places_under_test()
            .into_iter()
            .find(|p| crate::harness::other_backend(place, p) && usable(p))
        else {
            not_applicable(place, "no place of another backend to wait across");
            return Ok(());
        };
        let (mine, theirs) = (caps(place), caps(&partner));
        let mut both = mine;
        both.flags = mine.flags && theirs.flags;
        both.nonblocking_query = mine.nonblocking_query && theirs.nonblocking_query;
        both.concurrent_streams = mine.concurrent_streams && theirs.concurrent_streams;
        let wedged = Arc::new(AtomicBool::new(false));
        let mut runner = TestRunner::new(Config {
            cases: Config::default().cases.max(MIN_CASES),
            failure_persistence: None,
            max_shrink_iters: 2048,
            max_shrink_time: 60_000,
            ..Config::default()
        });
        let started = std::time::Instant::now();
        let shared_before = shared::checked();
        let result = runner.run(&program_strategy(false, true), |program| {
            run_program_across(
                place,
                Some(&partner),
                both,
                &program,
                PATIENCE,
                &wedged,
                None,
            )
            .map(drop)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, program)) => panic!(
                "{reason}\nminimal failing program on {place} with {partner} (odd slots):\n\
                 {program:#?}"
            ),
            Err(TestError::Abort(reason)) => panic!("model test aborted: {reason}"),
        }
        let shared = shared::checked() - shared_before;
        eprintln!(
            "[conformance] model across backends on {place} + {partner}: {:.2?}, {shared} \
             readers of shared host buffers checked",
            started.elapsed()
        );
        if caps(place).host_func_buffers || caps(&partner).host_func_buffers {
            assert!(
                shared > 0,
                "{place} + {partner}: no program read a shared host buffer"
            );
        }
        Ok(())
    });
}

/// Random programs with host functions that call back into devstream (≥ 256 per place), checked
/// against the happens-before model, in a child process with [`HANG`] watchdogs.
#[test]
fn hostile_programs_obey_happens_before() {
    for_each_place_isolated("model::hostile_programs_obey_happens_before", |place| {
        run_model(place, true)
    });
}

/// Two hostile programs at once on one place, each on a thread of its own with its own streams,
/// events, flags and buffers, each checked against its own model (≥ 256 programs per thread).
/// What they share is devstream's (registries, completion machinery, the place's workers and
/// queues, host-function bookkeeping): work of one must never order, hold back or corrupt the
/// other's. Places whose streams do not run concurrently are skipped (one program's gated work
/// would hold the other's, which a program's own gate releases cannot undo).
#[test]
fn concurrent_hostile_programs_each_obey_happens_before() {
    for_each_place_isolated(
        "model::concurrent_hostile_programs_each_obey_happens_before",
        |place| {
            if !caps(place).concurrent_streams {
                not_applicable(place, "streams do not run concurrently");
                return Ok(());
            }
            std::thread::scope(|scope| {
                let programs: Vec<_> = (0..2)
                    .map(|_| scope.spawn(|| run_model(place, true)))
                    .collect();
                for program in programs {
                    match program.join() {
                        Ok(result) => result?,
                        Err(panic) => std::panic::resume_unwind(panic),
                    }
                }
                Ok(())
            })
        },
    );
}

fn run_model(place: &Place, hostile: bool) -> devstream::Result<()> {
    run_model_with(place, hostile, None)
}

fn run_model_with(place: &Place, hostile: bool, elide: Option<bool>) -> devstream::Result<()> {
    let caps = caps(place);
    if !caps.host_funcs {
        not_applicable(place, "no host functions to observe the programs");
        return Ok(());
    }
    if !caps.flags {
        not_applicable(place, "no flags: programs run without gates and signals");
    }
    let defaults = Config::default();
    let config = Config {
        cases: defaults.cases.max(MIN_CASES),
        failure_persistence: None,
        max_shrink_iters: 2048,
        // A hang costs a watchdog period per shrink step: bound the shrinking.
        max_shrink_time: 60_000,
        ..defaults
    };
    let cases = config.cases;
    let patience = if hostile { *HANG } else { PATIENCE };
    let wedged = Arc::new(AtomicBool::new(false));
    let started = std::time::Instant::now();
    let shared_before = shared::checked();
    let mut runner = TestRunner::new(config);
    match runner.run(&program_strategy(hostile, false), |program| {
        if hostile && wedged.load(Ordering::SeqCst) {
            // A watchdog fired: the place may be wedged, so later programs prove nothing and
            // the one that hung is reported as it was.
            return Ok(());
        }
        run_program(place, caps, &program, patience, &wedged, elide).map(drop)
    }) {
        Ok(()) => {}
        Err(TestError::Fail(reason, program)) => {
            let wedged = if wedged.load(Ordering::SeqCst) {
                "\n(a watchdog fired: the place may be wedged; the program is not shrunk)"
            } else {
                ""
            };
            panic!("{reason}{wedged}\nminimal failing program on {place}:\n{program:#?}")
        }
        Err(TestError::Abort(reason)) => panic!("model test aborted: {reason}"),
    }
    let shared = shared::checked() - shared_before;
    eprintln!(
        "[conformance] model{} on {place}: {cases} programs in {:.2?}{}",
        if hostile { " (hostile)" } else { "" },
        started.elapsed(),
        if hostile {
            format!(", {shared} readers of shared host buffers checked")
        } else {
            String::new()
        }
    );
    if hostile && caps.host_func_buffers && !wedged.load(Ordering::SeqCst) {
        assert!(shared > 0, "{place}: no program read a shared host buffer");
    }
    Ok(())
}
