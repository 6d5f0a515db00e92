//! WGSL compute kernels: the user's dispatch path ([`WgpuKernel`]) and the internal byte-merge
//! kernels that make copies and fills of any alignment stream ordered.

use crate::buffer::{filled_buffer, BufferInner};
use crate::device::DeviceShared;
use crate::stream::WgpuStream;
use crate::util::lock;
use crate::util::{align_down, align_up};
use devstream_core::debug_fields;
use devstream_core::{Error, Result};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The internal kernels: `fill_bytes` and `copy_bytes` write whole 32-bit words, keeping the
/// bytes outside the range, so ranges need no alignment.
const BYTES_WGSL: &str = r#"
struct Params {
    dst_byte: u32,
    src_byte: u32,
    len: u32,
    value: u32,
}

@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<u32>;

fn src_byte(i: u32) -> u32 {
    let b = params.src_byte + i;
    return (src[b / 4u] >> ((b % 4u) * 8u)) & 0xffu;
}

@compute @workgroup_size(64)
fn fill_bytes(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let first = params.dst_byte / 4u;
    let end = (params.dst_byte + params.len + 3u) / 4u;
    let stride = groups.x * 64u;
    for (var w = first + gid.x; w < end; w = w + stride) {
        var word = dst[w];
        for (var k = 0u; k < 4u; k = k + 1u) {
            let pos = w * 4u + k;
            if (pos >= params.dst_byte && pos < params.dst_byte + params.len) {
                let shift = k * 8u;
                word = (word & ~(0xffu << shift)) | ((params.value & 0xffu) << shift);
            }
        }
        dst[w] = word;
    }
}

@compute @workgroup_size(64)
fn copy_bytes(@builtin(global_invocation_id) gid: vec3<u32>,
              @builtin(num_workgroups) groups: vec3<u32>) {
    let first = params.dst_byte / 4u;
    let end = (params.dst_byte + params.len + 3u) / 4u;
    let stride = groups.x * 64u;
    for (var w = first + gid.x; w < end; w = w + stride) {
        var word = dst[w];
        for (var k = 0u; k < 4u; k = k + 1u) {
            let pos = w * 4u + k;
            if (pos >= params.dst_byte && pos < params.dst_byte + params.len) {
                let shift = k * 8u;
                word = (word & ~(0xffu << shift)) | (src_byte(pos - params.dst_byte) << shift);
            }
        }
        dst[w] = word;
    }
}
"#;

const WORKGROUP: u64 = 64;

/// The internal pipelines of one device, created on first use.
pub(crate) struct InternalKernels {
    fill: wgpu::ComputePipeline,
    fill_layout: wgpu::BindGroupLayout,
    copy: wgpu::ComputePipeline,
    copy_layout: wgpu::BindGroupLayout,
}

/// `wgsl` as a shader module labelled `label` (errors go to the device's error scope).
fn shader_module(device: &DeviceShared, label: &str, wgsl: &str) -> wgpu::ShaderModule {
    device
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        })
}

/// The compute pipeline of `entry` in `module`, its layout derived from the shader (errors go
/// to the device's error scope).
fn compute_pipeline(
    device: &DeviceShared,
    module: &wgpu::ShaderModule,
    entry: &str,
) -> wgpu::ComputePipeline {
    device
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        })
}

/// A bind group of `entries` for `layout`, made inside a validation error scope: the group and
/// the scope's error.
fn scoped_bind_group(
    device: &DeviceShared,
    label: &str,
    layout: &wgpu::BindGroupLayout,
    entries: &[wgpu::BindGroupEntry<'_>],
) -> (wgpu::BindGroup, Option<wgpu::Error>) {
    device.scoped(wgpu::ErrorFilter::Validation, || {
        device.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout,
            entries,
        })
    })
}

/// Encodes one compute pass: `pipeline` over `workgroups`, with `bind_group` at group 0.
fn encode_pass(
    encoder: &mut wgpu::CommandEncoder,
    label: &str,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    workgroups: [u32; 3],
) {
    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some(label),
        timestamp_writes: None,
    });
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, bind_group, &[]);
    pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
}

fn create_internal(device: &DeviceShared) -> Result<InternalKernels> {
    let (made, error) = device.scoped(wgpu::ErrorFilter::Validation, || {
        let module = shader_module(device, "devstream bytes", BYTES_WGSL);
        let fill = compute_pipeline(device, &module, "fill_bytes");
        let copy = compute_pipeline(device, &module, "copy_bytes");
        InternalKernels {
            fill_layout: fill.get_bind_group_layout(0),
            copy_layout: copy.get_bind_group_layout(0),
            fill,
            copy,
        }
    });
    match error {
        Some(e) => Err(DeviceShared::wgpu_error("internal kernels", e)),
        None => Ok(made),
    }
}

fn internal(device: &DeviceShared) -> Result<&InternalKernels> {
    device
        .internal
        .get_or_init(|| create_internal(device))
        .as_ref()
        .map_err(Clone::clone)
}

/// The largest window of a buffer one storage binding may cover, and the offset alignment.
fn window_limits(device: &DeviceShared) -> (u64, u64) {
    let align = u64::from(device.limits.min_storage_buffer_offset_alignment).max(4);
    let max_binding = device.limits.max_storage_buffer_binding_size.min(1 << 30);
    (max_binding, align)
}

/// A binding window `[start, start + size)` of a buffer covering `[from, to)`.
fn window(from: u64, to: u64, align: u64, buffer_size: u64) -> (u64, u64) {
    let start = align_down(from, align);
    let end = align_up(to, 4).min(buffer_size);
    (start, end - start)
}

/// Merges `len` bytes (from `src[src_offset..]`, or the byte `value` when `src` is `None`) into
/// `dst[dst_offset..]`, chunk by chunk so that each binding stays within the device's limits.
fn encode_bytes(
    device: &DeviceShared,
    encoder: &mut wgpu::CommandEncoder,
    dst: &wgpu::Buffer,
    dst_offset: u64,
    src: Option<(&wgpu::Buffer, u64)>,
    value: u8,
    len: u64,
) -> Result<()> {
    let kernels = internal(device)?;
    let (max_binding, align) = window_limits(device);
    let chunk = align_down(max_binding.saturating_sub(2 * align + 8), 4).max(4);
    let end = dst_offset + len;
    let mut cur = dst_offset;
    while cur < end {
        let chunk_end = end.min(align_down(cur, 4) + chunk);
        let chunk_len = chunk_end - cur;
        let (dst_start, dst_size) = window(cur, chunk_end, align, dst.size());
        let mut params = [0u32; 4];
        params[0] = (cur - dst_start) as u32;
        params[2] = chunk_len as u32;
        params[3] = u32::from(value);
        let src_window = src.map(|(buffer, offset)| {
            let from = offset + (cur - dst_offset);
            let (start, size) = window(from, from + chunk_len, align, buffer.size());
            params[1] = (from - start) as u32;
            (buffer, start, size)
        });
        let bytes: Vec<u8> = params.iter().flat_map(|p| p.to_le_bytes()).collect();
        let uniform = filled_buffer(device, wgpu::BufferUsages::UNIFORM, &bytes)?;
        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: dst,
                    offset: dst_start,
                    size: wgpu::BufferSize::new(dst_size),
                }),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: uniform.as_entire_binding(),
            },
        ];
        if let Some((buffer, start, size)) = src_window {
            entries.push(wgpu::BindGroupEntry {
                binding: 2,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset: start,
                    size: wgpu::BufferSize::new(size),
                }),
            });
        }
        let (pipeline, layout) = if src.is_some() {
            (&kernels.copy, &kernels.copy_layout)
        } else {
            (&kernels.fill, &kernels.fill_layout)
        };
        let (bind_group, error) = scoped_bind_group(device, "devstream bytes", layout, &entries);
        if let Some(e) = error {
            return Err(DeviceShared::wgpu_error("Device::create_bind_group", e));
        }
        let words = align_up(chunk_end, 4) / 4 - cur / 4;
        let groups = words.div_ceil(WORKGROUP).clamp(
            1,
            u64::from(device.limits.max_compute_workgroups_per_dimension),
        ) as u32;
        encode_pass(
            encoder,
            "devstream bytes",
            pipeline,
            &bind_group,
            [groups, 1, 1],
        );
        cur = chunk_end;
    }
    Ok(())
}

/// Fills `len` bytes of `dst` from `offset` with `value`, any alignment.
pub(crate) fn fill_bytes(
    device: &DeviceShared,
    encoder: &mut wgpu::CommandEncoder,
    dst: &wgpu::Buffer,
    offset: u64,
    len: u64,
    value: u8,
) -> Result<()> {
    encode_bytes(device, encoder, dst, offset, None, value, len)
}

/// Copies `len` bytes between different buffers, any alignment.
pub(crate) fn copy_bytes(
    device: &DeviceShared,
    encoder: &mut wgpu::CommandEncoder,
    src: &wgpu::Buffer,
    src_offset: u64,
    dst: &wgpu::Buffer,
    dst_offset: u64,
    len: u64,
) -> Result<()> {
    encode_bytes(
        device,
        encoder,
        dst,
        dst_offset,
        Some((src, src_offset)),
        0,
        len,
    )
}

pub(crate) struct KernelInner {
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
    pub(crate) entry: String,
    /// The last few bind groups, by the ids of their buffers (most recent first).
    bind_cache: Mutex<VecDeque<(Vec<u64>, wgpu::BindGroup)>>,
}

/// How many bind groups a kernel keeps (each keeps its buffers alive while cached).
const BIND_CACHE: usize = 4;

/// A WGSL compute kernel compiled for one wgpu device, dispatched on a stream with
/// [`WgpuStream::dispatch`].
///
/// Its buffers are bound in order to `@group(0) @binding(0..)`; the bind group layout is
/// derived from the shader (storage, read-only storage or uniform buffers).
#[derive(Clone)]
pub struct WgpuKernel {
    pub(crate) inner: Arc<KernelInner>,
}

debug_fields!(WgpuKernel, |self| place: self.inner.device.place, entry: self.inner.entry);

impl WgpuKernel {
    /// Compiles `wgsl` and makes a compute pipeline of `entry_point` on the stream's device.
    /// A shader that does not compile or validate is `Error::InvalidArgument` with wgpu's
    /// message.
    pub fn new(stream: &WgpuStream, wgsl: &str, entry_point: &str) -> Result<WgpuKernel> {
        let device = stream.device();
        let (made, error) = device.scoped(wgpu::ErrorFilter::Validation, || {
            let module = shader_module(device, entry_point, wgsl);
            let pipeline = compute_pipeline(device, &module, entry_point);
            let layout = pipeline.get_bind_group_layout(0);
            (pipeline, layout)
        });
        if let Some(e) = error {
            return Err(Error::InvalidArgument(format!(
                "WGSL kernel {entry_point:?}: {e}"
            )));
        }
        let (pipeline, layout) = made;
        Ok(WgpuKernel {
            inner: Arc::new(KernelInner {
                device: Arc::clone(device),
                pipeline,
                layout,
                entry: entry_point.to_owned(),
                bind_cache: Mutex::new(VecDeque::new()),
            }),
        })
    }

    /// The compute pipeline.
    pub fn pipeline(&self) -> &wgpu::ComputePipeline {
        &self.inner.pipeline
    }

    /// The entry point's name.
    pub fn entry_point(&self) -> &str {
        &self.inner.entry
    }

    /// Binds `buffers` to `@group(0) @binding(0..)`.
    ///
    /// The last few bind groups are kept, so dispatching again with the same buffers costs no
    /// new bind group (a cached bind group keeps its buffers alive until it is evicted or the
    /// kernel is dropped).
    pub(crate) fn bind(&self, buffers: &[&Arc<BufferInner>]) -> Result<wgpu::BindGroup> {
        let key: Vec<u64> = buffers.iter().map(|b| b.id).collect();
        {
            let mut cache = lock(&self.inner.bind_cache);
            if let Some(entry) = cache
                .iter()
                .position(|(k, _)| *k == key)
                .and_then(|pos| cache.remove(pos))
            {
                let bind_group = entry.1.clone();
                cache.push_front(entry);
                return Ok(bind_group);
            }
        }
        let bind_group = self.create_bind_group(buffers)?;
        let mut cache = lock(&self.inner.bind_cache);
        cache.push_front((key, bind_group.clone()));
        cache.truncate(BIND_CACHE);
        Ok(bind_group)
    }

    fn create_bind_group(&self, buffers: &[&Arc<BufferInner>]) -> Result<wgpu::BindGroup> {
        let device = &self.inner.device;
        let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                // The buffer's own length: a block of a capture's pool may be larger.
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &b.buffer,
                    offset: 0,
                    size: wgpu::BufferSize::new(crate::util::align_up(b.len.max(4), 4)),
                }),
            })
            .collect();
        let (bind_group, error) =
            scoped_bind_group(device, &self.inner.entry, &self.inner.layout, &entries);
        match error {
            Some(e) => Err(Error::InvalidArgument(format!(
                "WGSL kernel {:?}: the buffers do not match its bindings: {e}",
                self.inner.entry
            ))),
            None => Ok(bind_group),
        }
    }
}

/// Encodes one dispatch.
pub(crate) fn encode_dispatch(
    encoder: &mut wgpu::CommandEncoder,
    kernel: &KernelInner,
    bind_group: &wgpu::BindGroup,
    workgroups: [u32; 3],
) {
    encode_pass(
        encoder,
        &kernel.entry,
        &kernel.pipeline,
        bind_group,
        workgroups,
    );
}
