//! Every place devstream finds here, with its capability table and priority range, and why each
//! compiled backend that found nothing is unavailable.
//!
//! ```text
//! cargo run --example info                      # CPU only (the default feature)
//! cargo run --example info --all-features       # every backend compiled in
//! ```

use devstream::{BackendKind, Place};

fn main() {
    let compiled = devstream::compiled_backends();
    println!(
        "devstream {} — backends compiled in: {}",
        env!("CARGO_PKG_VERSION"),
        compiled
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for kind in BackendKind::ALL {
        let status = match devstream::probe(kind) {
            Ok(()) => "available".to_string(),
            Err(e) => e.to_string(),
        };
        println!("  {:<7} {}", kind.name(), status);
    }

    let places = devstream::places();
    println!("\n{} place(s) usable now:", places.len());
    for place in &places {
        print_place(place);
    }
}

fn print_place(place: &Place) {
    println!("\n== {place}");
    match devstream::priority_range(place) {
        Ok(range) => println!(
            "  priority range: least {} greatest {} ({} level{})",
            range.least,
            range.greatest,
            range.levels(),
            if range.levels() == 1 { "" } else { "s" }
        ),
        Err(e) => println!("  priority range: {e}"),
    }
    match devstream::capabilities(place) {
        Ok(caps) => {
            for (name, value) in caps.rows() {
                println!("  {name:<22} {value}");
            }
        }
        Err(e) => println!("  capabilities: {e}"),
    }
}
