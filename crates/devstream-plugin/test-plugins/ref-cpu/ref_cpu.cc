/*
 * ref_cpu: a Paddle custom-device plug-in written against the device_ext.h of an installed
 * PaddlePaddle wheel, behaving like PaddleCustomDevice's reference custom_cpu runtime
 * (backends/custom_cpu/runtime/runtime.cc), for devstream's tests and examples.
 *
 * C-style code; compiled as C++ because device_ext.h itself is C++ (it includes <array> and
 * uses std::array in a signature).
 *
 * What it shares with the reference runtime:
 *   - two devices over host memory (malloc/free), one process-wide current device;
 *   - create_stream and create_event answer C_SUCCESS and leave their out-parameters
 *     unwritten, so every stream and event handle is the host's null;
 *   - every copy, asynchronous or not, is done inside the call; synchronize, record and wait
 *     calls do nothing and succeed;
 *   - no stream_add_callback, query_stream or query_event;
 *   - PADDLE_CUSTOM_RUNTIME_CHECK_VERSION, then the whole table zeroed and filled.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paddle/phi/backends/device_ext.h"

#define REF_CPU_DEVICES 2

static int current_device = 0;
/* The benchmark's same-name control builds this file with -DREF_CPU_DEVICE_TYPE=\"...\". */
#ifndef REF_CPU_DEVICE_TYPE
#define REF_CPU_DEVICE_TYPE "ref_cpu"
#endif
static char device_type[] = REF_CPU_DEVICE_TYPE;
static char sub_device_type[] = "v0.1-devstream-test";

static C_Status ref_initialize() { return C_SUCCESS; }

static C_Status ref_finalize() { return C_SUCCESS; }

static C_Status ref_set_device(const C_Device device) {
  if (device == NULL || device->id < 0 || device->id >= REF_CPU_DEVICES) {
    return C_ERROR;
  }
  current_device = device->id;
  return C_SUCCESS;
}

static C_Status ref_get_device(const C_Device device) {
  if (device == NULL) {
    return C_ERROR;
  }
  device->id = current_device;
  return C_SUCCESS;
}

static C_Status ref_deinit_device(const C_Device device) { return C_SUCCESS; }

static C_Status ref_create_stream(const C_Device device, C_Stream *stream) {
  /* As the reference runtime: succeeds without writing the stream. */
  return C_SUCCESS;
}

static C_Status ref_destroy_stream(const C_Device device, C_Stream stream) {
  return C_SUCCESS;
}

static C_Status ref_create_event(const C_Device device, C_Event *event) {
  /* As the reference runtime: succeeds without writing the event. */
  return C_SUCCESS;
}

static C_Status ref_record_event(const C_Device device,
                                 C_Stream stream,
                                 C_Event event) {
  return C_SUCCESS;
}

static C_Status ref_destroy_event(const C_Device device, C_Event event) {
  return C_SUCCESS;
}

static C_Status ref_synchronize_device(const C_Device device) {
  return C_SUCCESS;
}

static C_Status ref_synchronize_stream(const C_Device device, C_Stream stream) {
  return C_SUCCESS;
}

static C_Status ref_synchronize_event(const C_Device device, C_Event event) {
  return C_SUCCESS;
}

static C_Status ref_stream_wait_event(const C_Device device,
                                      C_Stream stream,
                                      C_Event event) {
  return C_SUCCESS;
}

static C_Status ref_allocate(const C_Device device, void **ptr, size_t size) {
  if (ptr == NULL) {
    return C_ERROR;
  }
  void *data = malloc(size);
  if (data == NULL) {
    *ptr = NULL;
    return C_FAILED;
  }
  *ptr = data;
  return C_SUCCESS;
}

static C_Status ref_deallocate(const C_Device device, void *ptr, size_t size) {
  free(ptr);
  return C_SUCCESS;
}

static C_Status ref_memory_set(const C_Device device,
                               void *ptr,
                               unsigned char value,
                               size_t size) {
  memset(ptr, value, size);
  return C_SUCCESS;
}

static C_Status ref_copy(const C_Device device,
                         void *dst,
                         const void *src,
                         size_t size) {
  memmove(dst, src, size);
  return C_SUCCESS;
}

static C_Status ref_copy_p2p(const C_Device dst_device,
                             const C_Device src_device,
                             void *dst,
                             const void *src,
                             size_t size) {
  memmove(dst, src, size);
  return C_SUCCESS;
}

static C_Status ref_async_copy(const C_Device device,
                               C_Stream stream,
                               void *dst,
                               const void *src,
                               size_t size) {
  /* Synchronous, as the reference runtime. */
  memmove(dst, src, size);
  return C_SUCCESS;
}

static C_Status ref_async_copy_p2p(const C_Device dst_device,
                                   const C_Device src_device,
                                   C_Stream stream,
                                   void *dst,
                                   const void *src,
                                   size_t size) {
  memmove(dst, src, size);
  return C_SUCCESS;
}

static C_Status ref_get_device_count(size_t *count) {
  if (count == NULL) {
    return C_ERROR;
  }
  *count = REF_CPU_DEVICES;
  return C_SUCCESS;
}

static C_Status ref_get_device_list(size_t *devices) {
  if (devices == NULL) {
    return C_ERROR;
  }
  for (size_t i = 0; i < REF_CPU_DEVICES; ++i) {
    devices[i] = i;
  }
  return C_SUCCESS;
}

static C_Status ref_device_memory_stats(const C_Device device,
                                        size_t *total_memory,
                                        size_t *free_memory) {
  long pages = sysconf(_SC_PHYS_PAGES);
  long available = sysconf(_SC_AVPHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (total_memory == NULL || free_memory == NULL || pages <= 0 || page <= 0) {
    return C_ERROR;
  }
  *total_memory = (size_t)pages * (size_t)page;
  /* Half of what is free, as the reference runtime's MEMORY_FRACTION. */
  *free_memory = (available > 0 ? (size_t)available * (size_t)page : 0) / 2;
  return C_SUCCESS;
}

static C_Status ref_device_min_chunk_size(const C_Device device, size_t *size) {
  if (size == NULL) {
    return C_ERROR;
  }
  *size = 512;
  return C_SUCCESS;
}

void InitPlugin(CustomRuntimeParams *params) {
  PADDLE_CUSTOM_RUNTIME_CHECK_VERSION(params);
  params->device_type = device_type;
  params->sub_device_type = sub_device_type;

  C_DeviceInterface *t = params->interface;
  /* As the reference runtime: the whole table, `size` included, zeroed first. */
  memset(t, 0, sizeof(C_DeviceInterface));

  t->initialize = ref_initialize;
  t->finalize = ref_finalize;
  t->init_device = ref_set_device;
  t->set_device = ref_set_device;
  t->get_device = ref_get_device;
  t->deinit_device = ref_deinit_device;

  t->create_stream = ref_create_stream;
  t->destroy_stream = ref_destroy_stream;
  t->create_event = ref_create_event;
  t->record_event = ref_record_event;
  t->destroy_event = ref_destroy_event;
  t->synchronize_device = ref_synchronize_device;
  t->synchronize_stream = ref_synchronize_stream;
  t->synchronize_event = ref_synchronize_event;
  t->stream_wait_event = ref_stream_wait_event;

  t->device_memory_allocate = ref_allocate;
  t->device_memory_deallocate = ref_deallocate;
  t->device_memory_set = ref_memory_set;
  t->host_memory_allocate = ref_allocate;
  t->host_memory_deallocate = ref_deallocate;
  t->unified_memory_allocate = ref_allocate;
  t->unified_memory_deallocate = ref_deallocate;
  t->memory_copy_h2d = ref_copy;
  t->memory_copy_d2h = ref_copy;
  t->memory_copy_d2d = ref_copy;
  t->memory_copy_p2p = ref_copy_p2p;
  t->async_memory_copy_h2d = ref_async_copy;
  t->async_memory_copy_d2h = ref_async_copy;
  t->async_memory_copy_d2d = ref_async_copy;
  t->async_memory_copy_p2p = ref_async_copy_p2p;

  t->get_device_count = ref_get_device_count;
  t->get_device_list = ref_get_device_list;
  t->device_memory_stats = ref_device_memory_stats;
  t->device_min_chunk_size = ref_device_min_chunk_size;
}
