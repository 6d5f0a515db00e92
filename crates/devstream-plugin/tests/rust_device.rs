//! A custom device written in Rust against the devstream-core traits, registered with
//! `register_custom_device` and used through `PluginBackend` like a plug-in.

mod common;

use devstream_core::traits::check_range;
use devstream_core::{
    BackendKind, Capabilities, CaptureMode, DeviceBackend, DeviceBuffer, DeviceEvent, DeviceFlag,
    DeviceStream, Error, EventFlags, HostBuffer, HostFn, LiveCounts, Place, Priority,
    PriorityRange, Result, StreamOptions, UnsupportedGraph,
};
use devstream_plugin::{register_custom_device, PluginBackend};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A device whose streams run every operation at once, on the submitting thread. With
/// `MISNAMED`, its `places()` list a place of another device type, which registration refuses.
struct InlineBackendOf<const MISNAMED: bool>;

type InlineBackend = InlineBackendOf<false>;

/// A backend that lists a place of another device type.
type Misnamed = InlineBackendOf<true>;

fn inline_place() -> Place {
    Place::custom("inline_dev", 0).unwrap()
}

fn caps() -> Capabilities {
    let mut caps = Capabilities::none();
    caps.host_funcs = true;
    caps.flags = true;
    caps.nonblocking_query = true;
    caps
}

#[derive(Clone, Debug)]
struct InlineStream {
    id: u64,
    place: Place,
}

#[derive(Clone, Debug)]
struct InlineEvent {
    id: u64,
    place: Place,
}

#[derive(Clone, Debug)]
struct InlineFlag {
    id: u64,
    place: Place,
    value: Arc<AtomicU32>,
}

#[derive(Debug)]
struct InlineBuffer {
    place: Place,
    data: Mutex<Vec<u8>>,
}

#[derive(Debug)]
struct InlineHost(Mutex<Vec<u8>>);

impl<const MISNAMED: bool> DeviceBackend for InlineBackendOf<MISNAMED> {
    type Stream = InlineStream;
    const KIND: BackendKind = BackendKind::Plugin;

    fn places() -> Vec<Place> {
        if MISNAMED {
            vec![Place::custom("something_else", 0).unwrap()]
        } else {
            vec![inline_place()]
        }
    }
    fn probe() -> Result<()> {
        Ok(())
    }
    fn capabilities(_: &Place) -> Result<Capabilities> {
        Ok(caps())
    }
    fn priority_range(_: &Place) -> Result<PriorityRange> {
        Ok(PriorityRange::NONE)
    }
    fn new_stream(place: &Place, _: StreamOptions) -> Result<InlineStream> {
        Ok(InlineStream {
            id: devstream_core::next_id(),
            place: place.clone(),
        })
    }
    fn default_stream(place: &Place) -> Result<InlineStream> {
        Self::new_stream(place, StreamOptions::default())
    }
    fn per_thread_stream(place: &Place) -> Result<InlineStream> {
        Err(Error::unsupported("Stream::per_thread", place))
    }
    fn new_event(place: &Place, _: EventFlags) -> Result<InlineEvent> {
        Ok(InlineEvent {
            id: devstream_core::next_id(),
            place: place.clone(),
        })
    }
    fn new_flag(place: &Place) -> Result<InlineFlag> {
        Ok(InlineFlag {
            id: devstream_core::next_id(),
            place: place.clone(),
            value: Arc::default(),
        })
    }
    fn live_counts() -> LiveCounts {
        LiveCounts::default()
    }
}

/// `query`, `synchronize` and `completion` of a stream or event of this device: everything
/// runs inline, so all submitted work is done already.
macro_rules! always_complete {
    () => {
        fn query(&self) -> Result<bool> {
            Ok(true)
        }
        fn synchronize(&self) -> Result<()> {
            Ok(())
        }
        fn completion(&self) -> devstream_core::Completion {
            devstream_core::Completion::ready(Ok(()))
        }
    };
}

// Capture is off: no graph type of its own, and `begin_capture`, `end_capture` and
// `is_capturing` keep the trait's defaults.
impl DeviceStream for InlineStream {
    type Event = InlineEvent;
    type Graph = UnsupportedGraph<Self>;
    type Flag = InlineFlag;
    type Buffer = InlineBuffer;
    type HostBuffer = InlineHost;

    fn place(&self) -> &Place {
        &self.place
    }
    fn id(&self) -> u64 {
        self.id
    }
    fn priority(&self) -> Priority {
        Priority::Normal
    }
    fn native_priority(&self) -> i32 {
        0
    }
    fn is_non_blocking(&self) -> bool {
        true
    }
    fn capabilities(&self) -> Capabilities {
        caps()
    }
    always_complete!();
    fn record(&self, _: &InlineEvent) -> Result<()> {
        Ok(())
    }
    fn record_event(&self) -> Result<InlineEvent> {
        InlineBackend::new_event(&self.place, EventFlags::default())
    }
    fn wait_event(&self, _: &InlineEvent) -> Result<()> {
        Ok(())
    }
    fn wait_stream(&self, _: &Self) -> Result<()> {
        Ok(())
    }
    fn launch_host_func(&self, mut f: HostFn) -> Result<()> {
        f();
        Ok(())
    }
    fn wait_flag(&self, flag: &InlineFlag, value: u32) -> Result<()> {
        while flag.get() < value {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
    fn write_flag(&self, flag: &InlineFlag, value: u32) -> Result<()> {
        flag.set(value);
        Ok(())
    }
    fn alloc(&self, len: usize) -> Result<InlineBuffer> {
        Ok(InlineBuffer {
            place: self.place.clone(),
            data: Mutex::new(vec![0; len]),
        })
    }
    fn alloc_host(&self, len: usize) -> Result<InlineHost> {
        Ok(InlineHost(Mutex::new(vec![0; len])))
    }
    fn copy_from_host(&self, dst: &InlineBuffer, offset: usize, src: &[u8]) -> Result<()> {
        check_range("copy_from_host", offset, src.len(), dst.len())?;
        dst.data.lock().unwrap()[offset..offset + src.len()].copy_from_slice(src);
        Ok(())
    }
    fn copy_host_to_device(
        &self,
        dst: &InlineBuffer,
        d: usize,
        src: &InlineHost,
        s: usize,
        len: usize,
    ) -> Result<()> {
        self.copy_from_host(dst, d, &src.0.lock().unwrap()[s..s + len])
    }
    fn copy_device_to_host(
        &self,
        dst: &InlineHost,
        d: usize,
        src: &InlineBuffer,
        s: usize,
        len: usize,
    ) -> Result<()> {
        dst.write(d, &src.data.lock().unwrap()[s..s + len])
    }
    fn copy_device_to_device(
        &self,
        dst: &InlineBuffer,
        d: usize,
        src: &InlineBuffer,
        s: usize,
        len: usize,
    ) -> Result<()> {
        // Staged: `src` and `dst` may be one buffer (one lock).
        let bytes = src.data.lock().unwrap()[s..s + len].to_vec();
        self.copy_from_host(dst, d, &bytes)
    }
    fn fill(&self, dst: &InlineBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        self.copy_from_host(dst, offset, &vec![value; len])
    }
}

impl DeviceEvent for InlineEvent {
    fn place(&self) -> Option<Place> {
        Some(self.place.clone())
    }
    fn id(&self) -> u64 {
        self.id
    }
    fn flags(&self) -> EventFlags {
        EventFlags::default()
    }
    always_complete!();
    fn elapsed(&self, _: &Self) -> Result<Duration> {
        Err(Error::TimingDisabled)
    }
}

impl DeviceFlag for InlineFlag {
    fn place(&self) -> &Place {
        &self.place
    }
    fn id(&self) -> u64 {
        self.id
    }
    fn set(&self, value: u32) {
        self.value.store(value, Ordering::SeqCst)
    }
    fn get(&self) -> u32 {
        self.value.load(Ordering::SeqCst)
    }
}

impl DeviceBuffer for InlineBuffer {
    fn len(&self) -> usize {
        self.data.lock().unwrap().len()
    }
    fn place(&self) -> &Place {
        &self.place
    }
}

impl HostBuffer for InlineHost {
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("read", offset, out.len(), self.len())?;
        out.copy_from_slice(&self.0.lock().unwrap()[offset..offset + out.len()]);
        Ok(())
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_range("write", offset, data.len(), self.len())?;
        self.0.lock().unwrap()[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }
}

#[test]
fn a_rust_backend_serves_its_device_type_through_plugin_handles() {
    register_custom_device::<InlineBackend>("inline_dev").unwrap();
    let place = inline_place();
    assert!(PluginBackend::places().contains(&place));
    assert!(devstream_plugin::device_types().contains(&"inline_dev".to_owned()));
    assert_eq!(PluginBackend::capabilities(&place).unwrap(), caps());

    let stream = PluginBackend::new_stream(&place, StreamOptions::default()).unwrap();
    assert_eq!(stream.place(), &place);
    assert!(stream.as_raw().is_none());
    let hits = common::launch_counting(&stream);
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let event = stream.record_event().unwrap();
    stream.wait_event(&event).unwrap();
    assert!(event.query().unwrap());
    assert!(matches!(event.elapsed(&event), Err(Error::TimingDisabled)));
    let flag = PluginBackend::new_flag(&place).unwrap();
    stream.write_flag(&flag, 3).unwrap();
    stream.wait_flag(&flag, 3).unwrap();
    assert_eq!(flag.get(), 3);

    let buffer = stream.alloc(10).unwrap();
    let host = stream.alloc_host(10).unwrap();
    stream.copy_from_host(&buffer, 0, &[4; 10]).unwrap();
    stream.fill(&buffer, 0, 2, 9).unwrap();
    stream
        .copy_device_to_host(&host, 0, &buffer, 0, 10)
        .unwrap();
    assert_eq!(host.to_vec().unwrap(), vec![9, 9, 4, 4, 4, 4, 4, 4, 4, 4]);
    assert!(matches!(
        stream.begin_capture(CaptureMode::Global),
        Err(Error::Unsupported { .. })
    ));

    // Mixing with a plug-in place is refused, never a panic.
    let plugin_stream = common::stream(&common::cpu0());
    let plugin_event = plugin_stream.record_event().unwrap();
    assert!(stream.wait_event(&plugin_event).is_err());
    assert!(plugin_stream.wait_event(&event).is_err());
    assert!(plugin_stream.wait_stream(&stream).is_err());
    let plugin_buffer = plugin_stream.alloc(4).unwrap();
    assert!(matches!(
        stream.fill(&plugin_buffer, 0, 4, 1),
        Err(Error::PlaceMismatch { .. })
    ));
    assert!(matches!(
        plugin_stream.fill(&buffer, 0, 4, 1),
        Err(Error::PlaceMismatch { .. })
    ));
    plugin_stream.synchronize().unwrap();

    // A device type is registered once.
    assert!(matches!(
        register_custom_device::<InlineBackend>("inline_dev"),
        Err(Error::Plugin { .. })
    ));
    assert!(matches!(
        register_custom_device::<InlineBackend>("custom_cpu"),
        Err(Error::Plugin { .. })
    ));
    assert!(matches!(
        register_custom_device::<Misnamed>("misnamed"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        register_custom_device::<InlineBackend>("cuda"),
        Err(Error::InvalidPlace { .. })
    ));
}
