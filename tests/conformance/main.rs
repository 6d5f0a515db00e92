//! The devstream conformance suite: one set of checks, run on every place that
//! [`devstream::places`] returns.
//!
//! It uses only the facade API and branches on [`devstream::Capabilities`], never on a backend's
//! name, so a new backend plugs in unchanged. A capability that is off is asserted to answer
//! `Error::Unsupported` (`capabilities.rs`, `contract.rs`); a check that needs an operation whose
//! capability is off, and gets that `Unsupported`, does not apply to the place.
//!
//! The rules checked here are stated once, for implementers, in the module documentation of
//! `crates/devstream-core/src/traits.rs` (required and optional operations, ordering, errors, host
//! functions and `WouldDeadlock`, captures and the capture-mode rule); each section's header
//! names the rules it checks.
//!
//! Environment:
//! * `DEVSTREAM_PLACES="cpu,cuda:0"` narrows the places under test (each named place must be
//!   available, or the suite fails);
//! * `DEVSTREAM_REQUIRE="cpu,wgpu"` makes `required_backends_are_present` fail when a listed
//!   backend (named as `BackendKind::name`) has no place, so a run can never pass by skipping;
//! * `DEVSTREAM_TEST_STACKS_AFTER=SECONDS` prints every thread's stack after SECONDS and exits
//!   (hang diagnosis where no debugger is installed, see `stacks.rs`);
//! * `PROPTEST_CASES` raises the number of model programs per place (at least 256).
//!
//! Run: `cargo test -p devstream --test conformance` (add `-- --nocapture` to see which places
//! ran and which checks did not apply).

// Streams and events hash and order by (place, id), which never change; their interior
// mutability is the backend's queue state.
#![allow(clippy::mutable_key_type)]

#[macro_use]
mod harness;

mod buffers;
mod capabilities;
mod capture;
mod completion;
mod contract;
mod cross;
mod cross_behind;
mod cross_hostile;
mod cross_interplay;
mod current;
mod device_loss;
mod drops;
mod errors;
mod events;
mod flags;
mod held;
mod host_fn_buffers;
mod hostile;
mod hostile_lifetimes;
mod model;
mod pool_model;
mod pool_model_graphs;
mod pools;
mod pools_capture;
mod semantics;
mod sizes;
mod stacks;
mod streams;
mod stress;

use devstream::BackendKind;
use harness::places_under_test;

/// Every backend named in `DEVSTREAM_REQUIRE` has at least one place under test.
#[test]
fn required_backends_are_present() {
    let places = places_under_test();
    eprintln!(
        "[conformance] places under test: {}",
        places
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let Ok(required) = std::env::var("DEVSTREAM_REQUIRE") else {
        eprintln!("[conformance] DEVSTREAM_REQUIRE not set: no backend is required");
        return;
    };
    let mut missing = Vec::new();
    for name in required.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(kind) = BackendKind::from_name(name) else {
            missing.push(format!(
                "{name:?} is not a backend name (expected one of {:?})",
                BackendKind::ALL.map(BackendKind::name)
            ));
            continue;
        };
        if places.iter().any(|p| p.backend() == kind) {
            eprintln!("[conformance] required backend {name}: present");
            continue;
        }
        let why = match devstream::probe(kind) {
            Ok(()) => "probe() is Ok but the backend lists no place (or DEVSTREAM_PLACES left \
                       none of its places)"
                .to_string(),
            Err(e) => format!("probe() says: {e}"),
        };
        missing.push(format!(
            "required backend {name} has no place under test: {why}"
        ));
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// `places()` always holds the CPU place when the `cpu` backend is compiled in, lists each place
/// once, and every listed place answers `capabilities` and `priority_range`.
#[test]
fn places_are_listed_once_and_answer() {
    let all = devstream::places();
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        all.len(),
        "places() lists a place twice: {all:?}"
    );
    if devstream::compiled_backends().contains(&BackendKind::Cpu) {
        assert!(all.contains(&devstream::Place::Cpu), "places() lacks cpu");
    }
    for place in &all {
        assert!(
            devstream::compiled_backends().contains(&place.backend()),
            "{place} is listed but its backend is not compiled"
        );
        devstream::capabilities(place).unwrap_or_else(|e| panic!("capabilities({place}): {e}"));
        devstream::priority_range(place).unwrap_or_else(|e| panic!("priority_range({place}): {e}"));
        assert_eq!(
            place.to_string().parse::<devstream::Place>().unwrap(),
            *place,
            "{place} does not round-trip through its text"
        );
    }
}
