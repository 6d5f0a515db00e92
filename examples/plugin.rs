//! The CuPy streams tutorial on a Paddle custom-device plug-in place.
//!
//! The plug-in is found the way Paddle finds it, through `CUSTOM_DEVICE_ROOT`. Left unset, the
//! example puts the workspace's test plug-ins (`devstream-test-plugin-cpu`, device type
//! `custom_cpu`, and, where it was built against an installed Paddle wheel's header,
//! `devstream-test-plugin-ref-cpu`, device type `ref_cpu`; both dev-dependencies of
//! `devstream`) into a fresh directory and points `CUSTOM_DEVICE_ROOT` there. Give another
//! place as the first argument to use another plug-in.
//!
//! ```text
//! cargo run --example plugin --features plugin                 # custom_cpu:0
//! cargo run --example plugin --features plugin -- ref_cpu:0    # like Paddle's own custom_cpu
//! CUSTOM_DEVICE_ROOT=/opt/plugins cargo run --example plugin --features plugin -- npu:0
//! ```
//!
//! What the place cannot do is skipped, and said: without host functions (a plug-in without
//! `stream_add_callback`, like Paddle's reference `custom_cpu`) the sum runs on the host after
//! `synchronize`; without a capture the replay part is skipped.
//!
//! The CuPy original:
//! ```python
//! a_np = np.arange(10)
//! s = cp.cuda.Stream()
//! with s:
//!     a_cp = cp.asarray(a_np)   # H2D transfer on stream s
//!     b_cp = cp.sum(a_cp)       # kernel launched on stream s
//! s.use()
//! b_np = cp.asnumpy(b_cp)
//! assert s == cp.cuda.get_current_stream()
//! cp.cuda.Stream.null.use()
//! ```
//!
//! The plug-in ABI has copies but no kernel launch, so `cp.sum` becomes stream-ordered work the
//! ABI does have: a device→host copy and a host function (`stream_add_callback`) that sums.

use devstream::{current_stream, set_current_stream, CaptureMode, CaptureSupport, Place, Stream};
use std::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Copies the workspace's test plug-ins into a fresh directory for `CUSTOM_DEVICE_ROOT` (the
/// `ref_cpu` one only where it was built).
fn stage_test_plugin() -> Result<PathBuf, Box<dyn Error>> {
    let file = devstream::plugin::discovery::test_plugin_file_name();
    let reference = devstream::plugin::discovery::ref_plugin_file_name();
    let exe = std::env::current_exe()?;
    let profile = exe
        .parent()
        .and_then(|examples| examples.parent())
        .ok_or("the example does not run from a cargo target directory")?;
    let built = [profile.join("deps").join(&file), profile.join(&file)]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "{file} is not built next to {}: run `cargo build -p devstream-test-plugin-cpu`, \
                 or set CUSTOM_DEVICE_ROOT to a directory of plug-ins",
                exe.display()
            )
        })?;
    let root =
        std::env::temp_dir().join(format!("devstream-plugin-example-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    std::fs::copy(&built, root.join(&file))?;
    if profile.join(&reference).is_file() {
        std::fs::copy(profile.join(&reference), root.join(&reference))?;
    }
    Ok(root)
}

/// The sum of little-endian `i64`s.
fn sum_of(bytes: &[u8]) -> i64 {
    bytes
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .sum()
}

fn main() -> Result<(), Box<dyn Error>> {
    let staged = if std::env::var_os("CUSTOM_DEVICE_ROOT").is_none() {
        let root = stage_test_plugin()?;
        // Single-threaded here: nothing reads the environment concurrently.
        std::env::set_var("CUSTOM_DEVICE_ROOT", &root);
        Some(root)
    } else {
        None
    };
    let place: Place = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "custom_cpu:0".to_owned())
        .parse()?;

    for plugin in devstream::plugin::loaded_plugins() {
        println!(
            "loaded {} ({}, runtime {:?}, layout {}): {:?}",
            plugin.device_type,
            plugin.path.display(),
            plugin.version,
            plugin.layout,
            plugin.places
        );
    }
    for (path, error) in devstream::plugin::load_failures() {
        println!("skipped {}: {error}", path.display());
    }
    let caps = devstream::capabilities(&place)?;
    println!("{place}: {:?}", caps.rows());

    let a_np: Vec<i64> = (0..10).collect();
    let s = Stream::new(&place)?;
    let sum = Arc::new(Mutex::new(None::<i64>));
    let mut host_sum = None;

    let a_dev = {
        let _with_s = s.make_current(); // `with s:`
        let stream = current_stream(&place)?;
        assert_eq!(stream, s);

        // a_cp = cp.asarray(a_np): H2D transfer on stream s
        let bytes: Vec<u8> = a_np.iter().flat_map(|v| v.to_le_bytes()).collect();
        let a_dev = stream.alloc(bytes.len())?;
        stream.copy_from_host(&a_dev, 0, &bytes)?;

        // b_cp = cp.sum(a_cp): in stream order, a D2H copy and a host function that sums it
        let a_host = Arc::new(stream.alloc_host(bytes.len())?);
        stream.copy_device_to_host(&a_host, 0, &a_dev, 0, bytes.len())?;
        let (input, result) = (a_host.clone(), sum.clone());
        let summing = move || {
            let total = input.to_vec().map(|bytes| sum_of(&bytes)).ok();
            *result.lock().expect("not poisoned") = total;
        };
        if caps.host_funcs {
            stream.launch_host_func(summing)?;
        } else {
            println!("{place} has no host functions: the sum runs on the host after synchronize");
            host_sum = Some(summing);
        }
        a_dev
    }; // the guard restores the previous current stream

    // s.use(): make s current without a scope
    set_current_stream(&s)?;
    // b_np = cp.asnumpy(b_cp): wait for the stream, then read the result
    current_stream(&place)?.synchronize()?;
    if let Some(summing) = host_sum.take() {
        summing();
    }
    let b_np = sum
        .lock()
        .expect("not poisoned")
        .ok_or("the sum did not run")?;
    assert_eq!(s, current_stream(&place)?);

    // cp.cuda.Stream.null.use(): back to the default stream
    let null = Stream::default_stream(&place)?;
    set_current_stream(&null)?;
    assert_ne!(s, current_stream(&place)?);

    let expected: i64 = a_np.iter().sum();
    assert_eq!(b_np, expected, "sum computed on the stream");
    println!("sum of {a_np:?} on {s} = {b_np} (expected {expected}): ok");

    // The same device→host copy captured once and replayed (as a CUDA graph would be).
    if caps.capture == CaptureSupport::None {
        println!("{place} cannot capture: the replay is skipped");
    } else {
        let replayed = Arc::new(s.alloc_host(a_np.len() * 8)?);
        s.begin_capture(CaptureMode::ThreadLocal)?;
        s.copy_device_to_host(&replayed, 0, &a_dev, 0, a_np.len() * 8)?;
        let graph = s.end_capture()?;
        s.synchronize()?;
        assert_eq!(
            replayed.to_vec()?,
            vec![0; a_np.len() * 8],
            "captured work ran"
        );
        graph.launch(&s)?;
        s.synchronize()?;
        assert_eq!(sum_of(&replayed.to_vec()?), expected, "the replayed copy");
        println!("{place}: a captured copy replayed: ok");
    }
    drop(a_dev);
    if let Some(root) = staged {
        // The plug-in stays loaded; its file is no longer needed.
        let _ = std::fs::remove_dir_all(root);
    }
    Ok(())
}
