//! The raw-wgpu side of the wgpu benchmarks (`bench-wgpu`, `cost-wgpu-record-query`): the same
//! work as devstream's, written with wgpu alone on the same device and queue.

use devstream::wgpu::{wgpu, WgpuStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Words (`u32`) in the dispatch benchmark's buffers.
pub const WORDS: usize = 64;

/// The WGSL kernel both sides dispatch: `dst[i] = src[i] * 2`.
pub const DOUBLE_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@compute @workgroup_size(64)
fn double(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&dst)) { dst[id.x] = src[id.x] * 2u; }
}
"#;

/// The raw-wgpu side: the same device and queue, with the same shader.
pub struct Raw {
    /// The device (a clone of the stream's).
    pub device: wgpu::Device,
    /// The queue (a clone of the stream's).
    pub queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    input: wgpu::Buffer,
    output: wgpu::Buffer,
    scratch: wgpu::Buffer,
}

impl Raw {
    /// Builds the raw side on `stream`'s device and queue.
    pub fn new(stream: &WgpuStream) -> Raw {
        let handle = stream.wgpu_device();
        let device = handle.wgpu_device().clone();
        let queue = handle.wgpu_queue().clone();
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("raw double"),
            source: wgpu::ShaderSource::Wgsl(DOUBLE_WGSL.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("raw double"),
            layout: None,
            module: &module,
            entry_point: Some("double"),
            compilation_options: Default::default(),
            cache: None,
        });
        let storage = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: (WORDS * 4) as u64,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let (input, output, scratch) = (storage("in"), storage("out"), storage("scratch"));
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("raw double"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: input.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: output.as_entire_binding(),
                },
            ],
        });
        Raw {
            device,
            queue,
            pipeline,
            bind_group,
            input,
            output,
            scratch,
        }
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default())
    }

    /// Blocks until `index` is done (`poll(Wait)`).
    pub fn wait(&self, index: wgpu::SubmissionIndex) {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            })
            .expect("poll");
    }

    /// An empty command buffer submitted and waited for.
    pub fn empty_submit_wait(&self) {
        let index = self.queue.submit([self.encoder().finish()]);
        self.wait(index);
    }

    /// A 4-byte `clear_buffer`, submitted, then one `poll(Poll)`: whether the queue is empty.
    pub fn record_query(&self) -> bool {
        let mut encoder = self.encoder();
        encoder.clear_buffer(&self.scratch, 0, Some(4));
        self.queue.submit([encoder.finish()]);
        self.device
            .poll(wgpu::PollType::Poll)
            .expect("poll")
            .is_queue_empty()
    }

    /// [`Raw::record_query`] answering what an event query answers: whether *this* submission
    /// is complete, rather than whether the whole queue is idle (which other submitters can
    /// keep false forever). Each submission registers a `Queue::on_submitted_work_done` note
    /// that raises `completed` to its sequence number `seq` (as devstream's scheduler does), and
    /// the answer is read after one `poll(Poll)`.
    pub fn record_query_noted(&self, completed: &Arc<AtomicU64>, seq: u64) -> bool {
        let mut encoder = self.encoder();
        encoder.clear_buffer(&self.scratch, 0, Some(4));
        self.queue.submit([encoder.finish()]);
        let note = Arc::clone(completed);
        self.queue.on_submitted_work_done(move || {
            note.fetch_max(seq, Ordering::SeqCst);
        });
        if completed.load(Ordering::Acquire) >= seq {
            return true;
        }
        self.device.poll(wgpu::PollType::Poll).expect("poll");
        completed.load(Ordering::Acquire) >= seq
    }

    /// `data` uploaded through a staging buffer, [`DOUBLE_WGSL`] dispatched, the result read
    /// back into `out`.
    pub fn dispatch_readback(&self, data: &[u8], out: &mut [u8]) {
        let len = data.len() as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("raw upload"),
            size: len,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        staging
            .get_mapped_range_mut(..)
            .expect("mapped at creation")
            .copy_from_slice(data);
        staging.unmap();
        let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("raw readback"),
            size: len,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.encoder();
        encoder.copy_buffer_to_buffer(&staging, 0, &self.input, 0, len);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        encoder.copy_buffer_to_buffer(&self.output, 0, &readback, 0, len);
        let index = self.queue.submit([encoder.finish()]);
        readback.map_async(wgpu::MapMode::Read, .., |r| r.expect("map"));
        self.wait(index);
        out.copy_from_slice(&readback.get_mapped_range(..).expect("mapped"));
    }
}
