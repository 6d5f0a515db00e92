//! The `tracing` spans of stream operations: with a subscriber listening at TRACE level every
//! facade op opens its span (named `devstream.<op>`, with the stream's id and place), and with
//! none listening the ops run the same (the span is built only on the cold path).
//!
//! A minimal subscriber written here records span names and fields, so the test needs no
//! subscriber crate.

#![cfg(feature = "cpu")]

use devstream::{Event, EventFlags, Place, Stream};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as TracingEvent, Metadata, Subscriber};

/// Span name → the fields of its last instance (name → value as printed).
type Seen = Arc<Mutex<BTreeMap<String, BTreeMap<String, String>>>>;

struct Recorder {
    seen: Seen,
    next: AtomicU64,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = BTreeMap::new();
        span.record(&mut Fields(&mut fields));
        self.seen
            .lock()
            .unwrap()
            .insert(span.metadata().name().to_string(), fields);
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &TracingEvent<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn program(s: &Stream, t: &Stream) -> devstream::Result<()> {
    let event = Event::new(&Place::Cpu, EventFlags::default())?;
    s.launch_host_func(|| {})?;
    s.record(&event)?;
    t.wait_event(&event)?;
    t.wait_stream(s)?;
    let _ = s.query()?;
    t.synchronize()?;
    drop(Stream::new(&Place::Cpu)?);
    let _ = event.query()?;
    event.synchronize()?;
    s.begin_capture(devstream::CaptureMode::Global)?;
    s.launch_host_func(|| {})?;
    let graph = s.end_capture()?;
    graph.launch(t)?;
    t.synchronize()?;
    s.synchronize()
}

#[test]
fn stream_ops_open_their_spans_while_a_subscriber_listens() {
    let s = Stream::new(&Place::Cpu).unwrap();
    let t = Stream::new(&Place::Cpu).unwrap();
    // No subscriber: the ops run, nothing to record.
    program(&s, &t).unwrap();

    let seen: Seen = Arc::default();
    let recorder = Recorder {
        seen: seen.clone(),
        next: AtomicU64::new(0),
    };
    tracing::subscriber::with_default(recorder, || program(&s, &t)).unwrap();
    let seen = seen.lock().unwrap();
    for op in [
        "devstream.launch_host_func",
        "devstream.record",
        "devstream.wait_event",
        "devstream.wait_stream",
        "devstream.synchronize",
    ] {
        let fields = seen
            .get(op)
            .unwrap_or_else(|| panic!("no span {op}; spans seen: {:?}", seen.keys()));
        assert!(fields.contains_key("stream"), "{op}: fields {fields:?}");
        assert_eq!(
            fields.get("place").map(String::as_str),
            Some("cpu"),
            "{op}: fields {fields:?}"
        );
    }
    assert_eq!(
        seen["devstream.record"]["stream"],
        s.id().to_string(),
        "the record span names the recording stream"
    );
    for (op, field, value) in [
        ("devstream.event_query", "event", None),
        ("devstream.event_synchronize", "event", None),
        ("devstream.graph_launch", "stream", Some(t.id().to_string())),
    ] {
        let fields = seen
            .get(op)
            .unwrap_or_else(|| panic!("no span {op}; spans seen: {:?}", seen.keys()));
        let got = fields.get(field);
        assert!(got.is_some(), "{op}: fields {fields:?}");
        if let Some(value) = value {
            assert_eq!(got, Some(&value), "{op}: fields {fields:?}");
        }
    }
    // Stream creation has its span too (with the place; there is no stream yet).
    assert_eq!(
        seen.get("devstream.stream_new")
            .and_then(|fields| fields.get("place"))
            .map(String::as_str),
        Some("cpu"),
        "spans seen: {:?}",
        seen.keys()
    );
}
