//! The timeline recorder (`devstream::trace`, cargo feature `trace`) on the CPU place: a small
//! multi-stream program is recorded, exported, and the exports are parsed back and checked.
//!
//! Run: `cargo test -p devstream --features trace --test trace`.

use devstream::trace::{self, FlowKind, Trace};
use devstream::{CaptureMode, Event, EventFlags, MemoryPool, Place, PoolOptions, Stream};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The recorder is process-wide: tests that record take turns.
fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sleep_ms(ms: u64) -> impl FnMut() + Send + 'static {
    move || std::thread::sleep(Duration::from_millis(ms))
}

/// Streams `load`, `compute`, `store`: load → (event) → compute → (wait_stream) → store.
struct Program {
    load: Stream,
    compute: Stream,
    store: Stream,
}

fn run_program() -> (Program, Trace) {
    let place = Place::Cpu;
    let program = Program {
        load: Stream::new(&place).unwrap(),
        compute: Stream::new(&place).unwrap(),
        store: Stream::new(&place).unwrap(),
    };
    trace::start();
    trace::name_stream(&program.load, "load");
    trace::name_stream(&program.compute, "compute");
    trace::name_stream(&program.store, "store");
    trace::label("load chunk");
    program.load.launch_host_func(sleep_ms(4)).unwrap();
    let loaded = program.load.record_event().unwrap();
    program.compute.wait_event(&loaded).unwrap();
    trace::label("compute chunk");
    program.compute.launch_host_func(sleep_ms(3)).unwrap();
    program.store.wait_stream(&program.compute).unwrap();
    program.store.launch_host_func(sleep_ms(1)).unwrap();
    let _ = program.store.query().unwrap();
    program.store.synchronize().unwrap();
    let timeline = trace::stop();
    (program, timeline)
}

fn op_index(timeline: &Trace, stream: &Stream, op: &str) -> usize {
    let lane = timeline
        .streams
        .iter()
        .position(|s| s.id == stream.id())
        .expect("the stream has a track");
    timeline
        .ops
        .iter()
        .position(|o| o.stream == lane && o.op == op)
        .unwrap_or_else(|| panic!("no {op} on stream {}", stream.id()))
}

#[test]
fn records_every_op_on_its_stream_with_flows() {
    let _turn = exclusive();
    let (program, timeline) = run_program();
    assert_eq!(timeline.streams.len(), 3, "one track per stream");
    let names: Vec<&str> = timeline.streams.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["load", "compute", "store"]);
    let ops: Vec<(&str, &str)> = timeline
        .ops
        .iter()
        .map(|op| (timeline.streams[op.stream].name.as_str(), op.op))
        .collect();
    assert_eq!(
        ops,
        [
            ("load", "launch_host_func"),
            ("load", "record_event"),
            ("compute", "wait_event"),
            ("compute", "launch_host_func"),
            ("store", "wait_stream"),
            ("store", "launch_host_func"),
            ("store", "query"),
            ("store", "synchronize"),
        ]
    );
    assert_eq!(timeline.ops[0].name(), "load chunk");
    assert_eq!(timeline.ops[1].name(), "record_event");
    for op in &timeline.ops {
        assert!(op.host.end >= op.host.start, "{op:?}");
    }

    let flows: Vec<(usize, usize, FlowKind)> = timeline
        .flows
        .iter()
        .map(|f| (f.from, f.to, f.kind))
        .collect();
    assert_eq!(
        flows,
        [
            (
                op_index(&timeline, &program.load, "record_event"),
                op_index(&timeline, &program.compute, "wait_event"),
                FlowKind::Event
            ),
            (
                op_index(&timeline, &program.compute, "launch_host_func"),
                op_index(&timeline, &program.store, "wait_stream"),
                FlowKind::Stream
            ),
        ]
    );
}

#[test]
fn device_spans_follow_the_stream_order_across_streams() {
    let _turn = exclusive();
    let (program, timeline) = run_program();
    if !program.load.capabilities().timing {
        for op in &timeline.ops {
            assert!(op.device.is_none(), "no timing, no device span: {op:?}");
        }
        return;
    }
    let span = |stream: &Stream, op: &str| {
        let index = op_index(&timeline, stream, op);
        timeline.ops[index]
            .device
            .unwrap_or_else(|| panic!("{op} on {} has no device span", stream.id()))
    };
    let load = span(&program.load, "launch_host_func");
    let compute = span(&program.compute, "launch_host_func");
    let store = span(&program.store, "launch_host_func");
    // The host functions sleep 4, 3 and 1 ms: their device spans cover that.
    assert!(load.duration() >= Duration::from_millis(4), "{load:?}");
    assert!(
        compute.duration() >= Duration::from_millis(3),
        "{compute:?}"
    );
    assert!(store.duration() >= Duration::from_millis(1), "{store:?}");
    // The waits order them on one clock: compute after load, store after compute.
    assert!(compute.start >= load.end, "{load:?} then {compute:?}");
    assert!(store.start >= compute.end, "{compute:?} then {store:?}");
    // Host-only ops have no device span; stream work submitted from the host is not shown
    // running on the device before it was submitted (up to the alignment's tolerance).
    for op in &timeline.ops {
        match op.op {
            "query" | "synchronize" => assert!(op.device.is_none(), "{op:?}"),
            _ => {
                let device = op.device.expect("timed op");
                assert!(device.end >= device.start);
                assert!(
                    device.end + Duration::from_millis(3) >= op.host.start,
                    "{op:?}"
                );
            }
        }
    }
    assert!(timeline.end() >= store.end);
}

/// Checks the trace-event format and returns the events.
fn parse_chrome(json: &str) -> Vec<Value> {
    let document: Value = serde_json::from_str(json).expect("the export is JSON");
    let events = document["traceEvents"]
        .as_array()
        .expect("a traceEvents array")
        .clone();
    assert!(!events.is_empty());
    let mut flow_starts: HashMap<u64, &Value> = HashMap::new();
    let mut flow_finishes: HashMap<u64, &Value> = HashMap::new();
    for event in &events {
        let ph = event["ph"].as_str().expect("every event has ph");
        assert!(event["ts"].is_number(), "ts: {event}");
        assert!(event["pid"].is_u64(), "pid: {event}");
        assert!(event["tid"].is_u64(), "tid: {event}");
        assert!(event["name"].is_string(), "name: {event}");
        match ph {
            "X" => {
                let dur = event["dur"].as_f64().expect("X has dur");
                assert!(dur >= 0.0, "{event}");
                assert!(event["ts"].as_f64().unwrap() >= 0.0, "{event}");
                assert!(matches!(event["cat"].as_str(), Some("host" | "device")));
            }
            "M" => {
                assert!(event["args"]["name"].is_string() || event["args"]["sort_index"].is_u64())
            }
            "s" => {
                let id = event["id"].as_u64().expect("flow id");
                assert!(flow_starts.insert(id, event).is_none(), "one start per id");
            }
            "f" => {
                let id = event["id"].as_u64().expect("flow id");
                assert_eq!(event["bp"], "e", "finishes bind to the enclosing slice");
                assert!(
                    flow_finishes.insert(id, event).is_none(),
                    "one finish per id"
                );
            }
            "C" => {
                assert_eq!(event["cat"], "memory", "{event}");
                assert!(event["args"]["used"].is_u64(), "{event}");
                assert!(event["args"]["reserved"].is_u64(), "{event}");
            }
            other => panic!("unexpected phase {other}: {event}"),
        }
    }
    let starts: BTreeSet<u64> = flow_starts.keys().copied().collect();
    let finishes: BTreeSet<u64> = flow_finishes.keys().copied().collect();
    assert_eq!(starts, finishes, "every flow start has its finish");
    // Every flow end sits inside a slice of its track, so viewers can bind it.
    let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for end in flow_starts.values().chain(flow_finishes.values()) {
        let ts = end["ts"].as_f64().unwrap();
        let bound = slices.iter().any(|s| {
            s["pid"] == end["pid"]
                && s["tid"] == end["tid"]
                && s["ts"].as_f64().unwrap() <= ts
                && ts <= s["ts"].as_f64().unwrap() + s["dur"].as_f64().unwrap()
        });
        assert!(bound, "flow end outside any slice: {end}");
    }
    events
}

#[test]
fn chrome_json_is_valid_trace_event_format() {
    let _turn = exclusive();
    let (program, timeline) = run_program();
    let events = parse_chrome(&timeline.to_chrome_json());

    // One named track per stream in the host-submit process (and in the device process where
    // the place can time).
    let mut tracks: BTreeMap<u64, BTreeMap<u64, String>> = BTreeMap::new();
    let mut process_names: BTreeMap<u64, String> = BTreeMap::new();
    for event in events.iter().filter(|e| e["ph"] == "M") {
        let pid = event["pid"].as_u64().unwrap();
        let name = event["args"]["name"].as_str().map(str::to_string);
        match (event["name"].as_str().unwrap(), name) {
            ("thread_name", Some(name)) => {
                let previous = tracks
                    .entry(pid)
                    .or_default()
                    .insert(event["tid"].as_u64().unwrap(), name);
                assert!(previous.is_none(), "one thread_name per track");
            }
            ("process_name", Some(name)) => {
                process_names.insert(pid, name);
            }
            _ => {}
        }
    }
    let expected: BTreeMap<u64, String> = [
        (program.load.id(), "load".to_string()),
        (program.compute.id(), "compute".to_string()),
        (program.store.id(), "store".to_string()),
    ]
    .into();
    let timed = program.load.capabilities().timing;
    assert_eq!(tracks.len(), if timed { 2 } else { 1 }, "{process_names:?}");
    for (pid, threads) in &tracks {
        assert_eq!(threads, &expected, "tracks of {}", process_names[pid]);
    }
    assert!(process_names.values().any(|n| n == "cpu host submit"));
    assert_eq!(process_names.values().any(|n| n == "cpu device"), timed);

    // Every op is a host slice on its stream's track; timed ops also a device slice.
    let host_slices = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "host")
        .count();
    let device_slices = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "device")
        .count();
    assert_eq!(host_slices, timeline.ops.len());
    assert_eq!(
        device_slices,
        timeline.ops.iter().filter(|o| o.device.is_some()).count()
    );
    assert!(events.iter().any(|e| e["ph"] == "X"
        && e["name"] == "load chunk"
        && e["args"]["op"] == "launch_host_func"));

    // The two flows: load → compute (wait_event) and compute → store (wait_stream).
    let flow = |ph: &str, name: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["ph"] == ph && e["name"] == name)
            .map(|e| e["tid"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(flow("s", "wait_event"), [program.load.id()]);
    assert_eq!(flow("f", "wait_event"), [program.compute.id()]);
    assert_eq!(flow("s", "wait_stream"), [program.compute.id()]);
    assert_eq!(flow("f", "wait_stream"), [program.store.id()]);
}

/// A minimal XML well-formedness check: balanced, properly nested tags, quoted attributes,
/// no stray `<` or `&`. Returns the element names in document order.
fn check_xml(text: &str) -> Vec<String> {
    let mut stack: Vec<String> = Vec::new();
    let mut elements = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let between = &rest[..open];
        assert!(!between.contains('>'), "stray '>' in text: {between:?}");
        for (at, _) in between.match_indices('&') {
            let entity = &between[at..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| entity.starts_with(e)),
                "bad entity at {entity:.20}"
            );
        }
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = &rest[open + 1..close];
        assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(top, name.trim(), "</{name}> closes <{top}>");
        } else {
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            assert!(!name.is_empty(), "empty tag name");
            elements.push(name.clone());
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[close + 1..];
    }
    assert!(rest.trim().is_empty(), "text after the root: {rest:?}");
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    elements
}

#[test]
fn svg_is_well_formed_with_one_lane_per_stream() {
    let _turn = exclusive();
    let (program, timeline) = run_program();
    let svg = timeline.to_svg();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    let elements = check_xml(&svg);
    assert_eq!(elements[0], "svg");
    assert_eq!(elements.iter().filter(|e| *e == "svg").count(), 1);
    assert_eq!(
        svg.matches("class=\"lane\"").count(),
        3,
        "one lane per stream"
    );
    for stream in [&program.load, &program.compute, &program.store] {
        assert!(svg.contains(&format!("data-stream=\"{}\"", stream.id())));
    }
    for name in ["load", "compute", "store", "load chunk", "compute chunk"] {
        assert!(svg.contains(&format!(">{name}<")), "{name} is drawn");
    }
    // Flow arrows: one path with the arrow marker per flow, plus the legend's.
    assert_eq!(
        svg.matches("marker-end=\"url(#arrow)\"").count(),
        timeline.flows.len() + 1
    );
    assert!(svg.contains("class=\"axis\"") && svg.contains("class=\"legend\""));
}

#[test]
fn labels_with_markup_are_escaped() {
    let _turn = exclusive();
    let stream = Stream::new(&Place::Cpu).unwrap();
    trace::start();
    trace::name_stream(&stream, "a<b> & \"c\"");
    trace::label("x < y & z");
    stream.launch_host_func(|| {}).unwrap();
    stream.synchronize().unwrap();
    let timeline = trace::stop();
    check_xml(&timeline.to_svg());
    let events = parse_chrome(&timeline.to_chrome_json());
    assert!(events.iter().any(|e| e["name"] == "x < y & z"));
    assert!(events
        .iter()
        .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "a<b> & \"c\""));
}

#[test]
fn nothing_is_recorded_when_off() {
    let _turn = exclusive();
    let stream = Stream::new(&Place::Cpu).unwrap();
    assert!(!trace::is_recording());
    stream.launch_host_func(|| {}).unwrap();
    trace::label("ignored");
    let empty = trace::stop();
    assert!(empty.ops.is_empty() && empty.streams.is_empty());

    trace::start();
    assert!(trace::is_recording());
    stream.launch_host_func(|| {}).unwrap();
    stream.synchronize().unwrap();
    let timeline = trace::stop();
    assert!(!trace::is_recording());
    assert_eq!(timeline.ops.len(), 2);
    assert_eq!(
        timeline.ops[0].name(),
        "launch_host_func",
        "the label set while off is gone"
    );

    stream.launch_host_func(|| {}).unwrap();
    stream.synchronize().unwrap();
    assert!(
        trace::stop().ops.is_empty(),
        "after stop nothing is recorded"
    );
}

#[test]
fn capture_gets_no_timing_events_and_replays_unchanged() {
    let _turn = exclusive();
    let place = Place::Cpu;
    let stream = Stream::new(&place).unwrap();
    if stream.capabilities().capture == devstream::CaptureSupport::None {
        return;
    }
    let runs = Arc::new(Mutex::new(0u32));
    trace::start();
    stream.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let counter = runs.clone();
    stream
        .launch_host_func(move || *counter.lock().unwrap() += 1)
        .unwrap();
    let graph = stream.end_capture().unwrap();
    graph.launch(&stream).unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    let timeline = trace::stop();
    assert_eq!(
        *runs.lock().unwrap(),
        2,
        "the graph holds the host function only"
    );
    let ops: Vec<&str> = timeline.ops.iter().map(|o| o.op).collect();
    assert_eq!(
        ops,
        [
            "begin_capture",
            "launch_host_func",
            "end_capture",
            "graph_launch",
            "graph_launch",
            "synchronize"
        ]
    );
    assert!(timeline.ops[1].device.is_none(), "captured: host time only");
    if stream.capabilities().timing {
        assert!(timeline.ops[3].device.is_some(), "a graph launch is timed");
    }
}

#[test]
fn ops_from_several_threads_and_rerecorded_events() {
    let _turn = exclusive();
    let place = Place::Cpu;
    let streams: Vec<Stream> = (0..4).map(|_| Stream::new(&place).unwrap()).collect();
    let sink = Stream::new(&place).unwrap();
    let marker = Event::new(&place, EventFlags::default()).unwrap();
    trace::start();
    std::thread::scope(|scope| {
        for stream in &streams {
            scope.spawn(move || {
                for _ in 0..25 {
                    stream.launch_host_func(|| {}).unwrap();
                }
            });
        }
    });
    marker.record(&streams[0]).unwrap();
    marker.record(&streams[1]).unwrap(); // re-recording replaces what it captures
    sink.wait_event(&marker).unwrap();
    for stream in &streams {
        stream.synchronize().unwrap();
    }
    sink.synchronize().unwrap();
    let timeline = trace::stop();
    assert_eq!(timeline.streams.len(), 5);
    assert_eq!(timeline.ops.len(), 4 * 25 + 2 + 1 + 5);
    for lane in 0..4 {
        assert_eq!(
            timeline
                .ops_of(lane)
                .filter(|o| o.op == "launch_host_func")
                .count(),
            25
        );
    }
    assert_eq!(timeline.flows.len(), 1);
    let from = &timeline.ops[timeline.flows[0].from];
    assert_eq!(from.op, "record");
    assert_eq!(
        timeline.streams[from.stream].id,
        streams[1].id(),
        "the flow starts at the last record"
    );
    parse_chrome(&timeline.to_chrome_json());
    check_xml(&timeline.to_svg());
}

/// A wait on another backend's event or stream draws its flow between the two backends' tracks,
/// both ways: from the other place's `record_event` (or its last op, for `wait_stream`) to the
/// wait on the CPU stream, and from the CPU stream's ops to the waits of a stream of the other
/// place; the Chrome export puts each flow's ends on the two places' tracks. Needs a place of
/// another backend that waits on CPU work: with `wgpu` or `plugin` compiled in, wgpu:0 or the
/// test plug-in's custom_cpu:0 must be found (CI requires both).
#[cfg(any(feature = "wgpu", feature = "plugin"))]
#[test]
fn waits_across_backends_draw_flows_between_the_backends_tracks() {
    let _turn = exclusive();
    let other = devstream::places()
        .into_iter()
        .find(|p| {
            p.backend() != devstream::BackendKind::Cpu
                && devstream::capabilities(p).is_ok_and(|c| c.foreign_waits)
        })
        .expect("a place of another backend that waits on CPU work (wgpu:0 or custom_cpu:0)");
    let cpu = Stream::new(&Place::Cpu).unwrap();
    let there = Stream::new(&other).unwrap();
    trace::start();
    let produced = there.record_event().unwrap();
    cpu.wait_event(&produced).unwrap();
    cpu.wait_stream(&there).unwrap();
    let handed = cpu.record_event().unwrap();
    there.wait_event(&handed).unwrap();
    there.wait_stream(&cpu).unwrap();
    cpu.synchronize().unwrap();
    there.synchronize().unwrap();
    let timeline = trace::stop();
    let places: BTreeSet<String> = timeline
        .streams
        .iter()
        .map(|s| s.place.to_string())
        .collect();
    assert!(
        places.contains("cpu") && places.contains(&other.to_string()),
        "{places:?}"
    );
    let flows: Vec<(usize, usize, FlowKind)> = timeline
        .flows
        .iter()
        .map(|f| (f.from, f.to, f.kind))
        .collect();
    let recorded_there = op_index(&timeline, &there, "record_event");
    let recorded_here = op_index(&timeline, &cpu, "record_event");
    assert_eq!(
        flows,
        [
            (
                recorded_there,
                op_index(&timeline, &cpu, "wait_event"),
                FlowKind::Event
            ),
            (
                recorded_there,
                op_index(&timeline, &cpu, "wait_stream"),
                FlowKind::Stream
            ),
            (
                recorded_here,
                op_index(&timeline, &there, "wait_event"),
                FlowKind::Event
            ),
            (
                recorded_here,
                op_index(&timeline, &there, "wait_stream"),
                FlowKind::Stream
            ),
        ],
        "on {other}"
    );
    // In the export, each flow starts on the recording stream's track and ends on the waiting
    // stream's, whose places differ.
    let events = parse_chrome(&timeline.to_chrome_json());
    let track = |ph: &str, id: u64| {
        let end = events
            .iter()
            .find(|e| e["ph"] == ph && e["id"] == id)
            .unwrap_or_else(|| panic!("no {ph} event for flow {id}"));
        (end["pid"].as_u64().unwrap(), end["tid"].as_u64().unwrap())
    };
    for (index, flow) in timeline.flows.iter().enumerate() {
        let id = index as u64 + 1;
        let (from, to) = (track("s", id), track("f", id));
        let stream_of = |op: usize| &timeline.streams[timeline.ops[op].stream];
        assert_eq!(
            from.1,
            stream_of(flow.from).id,
            "flow {id} starts on its stream"
        );
        assert_eq!(to.1, stream_of(flow.to).id, "flow {id} ends on its stream");
        assert_ne!(from.0, to.0, "flow {id} joins two places' tracks");
    }
    let svg = timeline.to_svg();
    check_xml(&svg);
    let arrows = svg
        .split("<g class=\"flows\"")
        .nth(1)
        .and_then(|group| group.split("</g>").next())
        .expect("the SVG has a flows group");
    assert_eq!(
        arrows.matches("<path").count(),
        timeline.flows.len(),
        "one arrow per flow in the SVG"
    );
}

/// Starts a recording that watches a new pool of the CPU place as "scratch" and takes a buffer
/// of 1 MiB from it, fills it, drops it and drains: the stream and the pool, still recording.
fn record_a_scratch_buffer() -> (Stream, MemoryPool) {
    let place = Place::Cpu;
    let stream = Stream::new(&place).unwrap();
    let keep_all = PoolOptions {
        release_threshold: u64::MAX,
        ..Default::default()
    };
    let pool = MemoryPool::new(&place, keep_all).unwrap();
    trace::start();
    trace::watch_pool(&pool, "scratch");
    let buffer = stream.alloc_from(&pool, 1 << 20).unwrap();
    stream.fill(&buffer, 0, 1 << 20, 1).unwrap();
    drop(buffer);
    stream.synchronize().unwrap();
    (stream, pool)
}

/// A pool's used and reserved bytes are a counter track: sampled when watched, after the
/// allocation, and after the drain that returned the buffer; the default pool of `alloc` is
/// watched without being named; the Chrome export has the samples as `"C"` events.
#[test]
fn pool_bytes_are_a_counter_track() {
    let _turn = exclusive();
    let place = Place::Cpu;
    let (stream, pool) = record_a_scratch_buffer();
    let from_default = stream.alloc(4096).unwrap();
    stream.fill(&from_default, 0, 4096, 2).unwrap();
    drop(from_default);
    stream.synchronize().unwrap();
    let timeline = trace::stop();

    let scratch = timeline
        .pools
        .iter()
        .find(|track| track.name == "scratch")
        .expect("the watched pool has a track");
    assert_eq!((&scratch.place, scratch.id), (&place, pool.id()));
    let bytes: Vec<(u64, u64)> = scratch
        .samples
        .iter()
        .map(|s| (s.used_bytes, s.reserved_bytes))
        .collect();
    assert_eq!(bytes, [(0, 0), (1 << 20, 1 << 20), (0, 1 << 20)]);
    assert!(scratch.samples.windows(2).all(|w| w[0].at <= w[1].at));

    let default = MemoryPool::default_for(&place).unwrap();
    let default_track = timeline
        .pools
        .iter()
        .find(|track| track.id == default.id())
        .expect("alloc's default pool has a track");
    assert_eq!(default_track.name, format!("pool {}", default.id()));
    assert!(default_track.samples.iter().any(|s| s.used_bytes >= 4096));

    let events = parse_chrome(&timeline.to_chrome_json());
    let counters: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "scratch")
        .map(|e| {
            let args = &e["args"];
            (
                args["used"].as_u64().unwrap(),
                args["reserved"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counters, bytes);
}

/// The y coordinate of each sample in a step path `M x,y H x V y H x V y ... H x` (the path
/// of a pool's counter in the SVG): the first point's, then one per `V`.
fn step_levels(path: &str) -> Vec<f64> {
    let d = path
        .split(" d=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a path with d");
    let mut levels = Vec::new();
    let first = d.strip_prefix('M').expect("starts with M");
    let y = first
        .split(['H', 'V'])
        .next()
        .and_then(|point| point.split(',').nth(1))
        .expect("M x,y");
    levels.push(y.trim().parse().unwrap());
    for part in d.split('V').skip(1) {
        let y = part.split('H').next().unwrap();
        levels.push(y.trim().parse().unwrap());
    }
    levels
}

/// The SVG draws each watched pool's used and reserved bytes as a step chart under the stream
/// lanes, labelled with the pool's name and peak: one step per sample, at the heights the
/// samples' bytes give.
#[test]
fn svg_draws_each_pool_as_a_step_chart_under_the_lanes() {
    let _turn = exclusive();
    let (_stream, pool) = record_a_scratch_buffer();
    let timeline = trace::stop();
    let samples = &timeline
        .pools
        .iter()
        .find(|track| track.name == "scratch")
        .expect("the watched pool has a track")
        .samples;
    let bytes: Vec<(u64, u64)> = samples
        .iter()
        .map(|s| (s.used_bytes, s.reserved_bytes))
        .collect();
    assert_eq!(bytes, [(0, 0), (1 << 20, 1 << 20), (0, 1 << 20)]);

    let svg = timeline.to_svg();
    check_xml(&svg);
    let opening = format!("<g class=\"pool\" data-pool=\"{}\"", pool.id());
    let start = svg.find(&opening).expect("the pool has a track in the SVG");
    let track = &svg[start..start + svg[start..].find("</g>").unwrap()];
    assert!(
        track.contains(">scratch<"),
        "labelled with its name: {track}"
    );
    assert!(
        track.contains("peak reserved 1.0 MiB") && track.contains("peak used 1.0 MiB"),
        "labelled with its peaks: {track}"
    );
    let path_of = |class: &str| {
        let at = track
            .find(&format!("<path class=\"{class}\""))
            .unwrap_or_else(|| panic!("a {class} path: {track}"));
        &track[at..at + track[at..].find("/>").unwrap()]
    };
    let (used, reserved) = (
        step_levels(path_of("used")),
        step_levels(path_of("reserved")),
    );
    assert_eq!(used.len(), samples.len(), "one step per sample: {used:?}");
    assert_eq!(reserved.len(), samples.len(), "{reserved:?}");
    // SVG y grows downwards: the peak is the top level, zero the bottom.
    let (bottom, top) = (used[0], used[1]);
    assert!(top < bottom, "{used:?}");
    assert_eq!(used, [bottom, top, bottom]);
    assert_eq!(reserved, [bottom, top, top]);
    // Under the stream lanes.
    let lane = svg.rfind("class=\"lane\"").unwrap();
    assert!(lane < start, "the pool's track comes after the lanes");
}
