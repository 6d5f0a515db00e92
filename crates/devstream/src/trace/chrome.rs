//! Chrome trace-event JSON export (the "JSON Object Format" that Perfetto and
//! `chrome://tracing` load).

use super::{FlowKind, Span, Trace, TracedOp};
use devstream_core::Place;
use serde_json::{json, Value};

/// Microseconds, the unit of `ts` and `dur`, with nanosecond precision.
fn micros(duration: std::time::Duration) -> f64 {
    duration.as_nanos() as f64 / 1000.0
}

/// A timestamp inside `span`, for binding a flow end to the slice drawn for it.
fn inside(span: Span) -> f64 {
    micros(span.start + span.duration() / 2)
}

/// Process ids: each place gets a host-submit process and a device process.
struct Layout {
    places: Vec<Place>,
}

impl Layout {
    fn new(trace: &Trace) -> Layout {
        let mut places: Vec<Place> = Vec::new();
        let pool_places = trace.pools.iter().map(|pool| &pool.place);
        for place in trace.streams.iter().map(|s| &s.place).chain(pool_places) {
            if !places.contains(place) {
                places.push(place.clone());
            }
        }
        Layout { places }
    }
    fn place_index(&self, place: &Place) -> u64 {
        self.places.iter().position(|p| p == place).unwrap_or(0) as u64
    }
    fn host_pid(&self, place: &Place) -> u64 {
        2 * self.place_index(place) + 1
    }
    fn device_pid(&self, place: &Place) -> u64 {
        2 * self.place_index(place) + 2
    }
}

fn metadata(name: &str, pid: u64, tid: u64, args: Value) -> Value {
    json!({ "name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args })
}

/// The name and sort index of a process or thread (`of`: `"process"` or `"thread"`).
fn name_and_order(of: &str, pid: u64, tid: u64, name: &str, sort_index: usize) -> [Value; 2] {
    [
        metadata(&format!("{of}_name"), pid, tid, json!({ "name": name })),
        metadata(
            &format!("{of}_sort_index"),
            pid,
            tid,
            json!({ "sort_index": sort_index }),
        ),
    ]
}

fn slice(trace: &Trace, op: &TracedOp, index: usize, span: Span, pid: u64, cat: &str) -> Value {
    let stream = &trace.streams[op.stream];
    let mut args = json!({ "op": op.op, "stream": stream.id, "index": index });
    if let Some(label) = &op.label {
        args["label"] = json!(label);
    }
    json!({
        "name": op.name(),
        "cat": cat,
        "ph": "X",
        "ts": micros(span.start),
        "dur": micros(span.duration()),
        "pid": pid,
        "tid": stream.id,
        "args": args,
    })
}

pub(super) fn render(trace: &Trace) -> String {
    let layout = Layout::new(trace);
    let mut events: Vec<Value> = Vec::new();

    for (index, place) in layout.places.iter().enumerate() {
        let host = layout.host_pid(place);
        let name = format!("{place} host submit");
        events.extend(name_and_order("process", host, 0, &name, 2 * index));
        let timed = trace
            .ops
            .iter()
            .any(|op| op.device.is_some() && &trace.streams[op.stream].place == place);
        if timed {
            let device = layout.device_pid(place);
            let name = format!("{place} device");
            events.extend(name_and_order("process", device, 0, &name, 2 * index + 1));
        }
    }

    for (index, stream) in trace.streams.iter().enumerate() {
        let mut pids = vec![layout.host_pid(&stream.place)];
        if trace.ops_of(index).any(|op| op.device.is_some()) {
            pids.push(layout.device_pid(&stream.place));
        }
        for pid in pids {
            events.extend(name_and_order(
                "thread",
                pid,
                stream.id,
                &stream.name,
                index,
            ));
        }
    }

    for (index, op) in trace.ops.iter().enumerate() {
        let place = &trace.streams[op.stream].place;
        events.push(slice(
            trace,
            op,
            index,
            op.host,
            layout.host_pid(place),
            "host",
        ));
        if let Some(device) = op.device {
            events.push(slice(
                trace,
                op,
                index,
                device,
                layout.device_pid(place),
                "device",
            ));
        }
    }

    for (index, flow) in trace.flows.iter().enumerate() {
        let (from, to) = (&trace.ops[flow.from], &trace.ops[flow.to]);
        let (from_stream, to_stream) = (&trace.streams[from.stream], &trace.streams[to.stream]);
        let ends = match (from.device, to.device) {
            (Some(from_span), Some(to_span)) => (
                (from_span, layout.device_pid(&from_stream.place)),
                (to_span, layout.device_pid(&to_stream.place)),
            ),
            _ => (
                (from.host, layout.host_pid(&from_stream.place)),
                (to.host, layout.host_pid(&to_stream.place)),
            ),
        };
        let name = match flow.kind {
            FlowKind::Event => "wait_event",
            FlowKind::Stream => "wait_stream",
        };
        let id = index + 1;
        events.push(json!({
            "name": name, "cat": "flow", "ph": "s", "id": id,
            "ts": inside(ends.0 .0), "pid": ends.0 .1, "tid": from_stream.id,
        }));
        events.push(json!({
            "name": name, "cat": "flow", "ph": "f", "bp": "e", "id": id,
            "ts": inside(ends.1 .0), "pid": ends.1 .1, "tid": to_stream.id,
        }));
    }

    for pool in &trace.pools {
        let pid = layout.host_pid(&pool.place);
        for sample in &pool.samples {
            events.push(json!({
                "name": pool.name, "cat": "memory", "ph": "C", "id": pool.id,
                "ts": micros(sample.at), "pid": pid, "tid": 0,
                "args": { "used": sample.used_bytes, "reserved": sample.reserved_bytes },
            }));
        }
    }

    let started = trace
        .started
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let other = json!({
        "generator": concat!("devstream ", env!("CARGO_PKG_VERSION")),
        "started_unix_s": started,
        "streams": trace.streams.len(),
        "ops": trace.ops.len(),
        "flows": trace.flows.len(),
        "pools": trace.pools.len(),
    });
    // One event per line: compact, and diffs stay readable.
    let mut out = String::from("{\"traceEvents\":[\n");
    for (index, event) in events.iter().enumerate() {
        if index > 0 {
            out.push_str(",\n");
        }
        out.push_str(&event.to_string());
    }
    out.push_str("\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":");
    out.push_str(&other.to_string());
    out.push_str("}\n");
    out
}
