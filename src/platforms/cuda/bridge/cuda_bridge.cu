// The CUDA half of host callbacks (see callback/device_bridge_abi.h): operands come off the device on the
// stream the CUDA plugin hands the FFI handler, results go back on it. Built with nvcc against the
// CUDA runtime (linked statically, so the only CUDA library it needs at run time is the driver's
// libcuda.so.1, which the CUDA plugin needs too). plugboard loads it only for a CUDA client.
//
//  - blocking: device->pinned host copies on the handler's stream, synchronize, call the host
//    function, pinned->device copies of the results, synchronize;
//  - ordered: device->pinned staging copies, then cudaLaunchHostFunc on the same stream, so the host
//    function is queued behind the copies and the stream goes on without waiting for the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "platforms/cuda/bridge/bridge_sizes.h"
#include "callback/device_bridge_abi.h"

namespace {

using plugboard_cuda::add_aligned;
using plugboard_cuda::checked_byte_size;
using plugboard_cuda::element_size;
using plugboard_cuda::grown_capacity;
using plugboard_cuda::round_up;

XLA_FFI_Error* fail(const XLA_FFI_Api* api, const char* message) {
  if (!api || api->struct_size < offsetof(XLA_FFI_Api, XLA_FFI_Error_Create) + sizeof(void*) ||
      !api->XLA_FFI_Error_Create)
    return nullptr;
  XLA_FFI_Error_Create_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = message;
  args.errc = XLA_FFI_Error_Code_INTERNAL;
  return api->XLA_FFI_Error_Create(&args);
}

XLA_FFI_Error* fail_cuda(const XLA_FFI_Api* api, const char* what, cudaError_t e) {
  char message[512];
  std::snprintf(message, sizeof(message), "plugboard CUDA bridge: %s failed: %s (%s)", what, cudaGetErrorString(e),
                cudaGetErrorName(e));
  return fail(api, message);
}

// Describes one device buffer of the frame; false when it is not an array plugboard passes on.
bool describe(int type, void* raw, PbHostTensor& out) {
  if (type != XLA_FFI_ArgType_BUFFER || !raw) return false;
  const auto* b = static_cast<const XLA_FFI_Buffer*>(raw);
  // A negative dimension or a byte size past SIZE_MAX is refused, never wrapped (see bridge_sizes.h).
  size_t bytes = 0;
  if (b->rank > INT32_MAX || !checked_byte_size(element_size(b->dtype), b->rank, b->dims, &bytes)) return false;
  if (bytes > 0 && !b->data) return false;
  out.dtype = b->dtype;
  out.rank = static_cast<int32_t>(b->rank);
  out.dims = b->dims;
  out.data = b->data;  // device memory
  out.size_bytes = bytes;
  return true;
}

bool is_token(int type, void* raw) {
  return type == XLA_FFI_ArgType_BUFFER && raw && static_cast<const XLA_FFI_Buffer*>(raw)->dtype == XLA_FFI_DataType_TOKEN;
}

// The arrays among a frame's entries, tokens left out (they only order side effects).
template <class Types>
bool collect(int64_t size, const Types* types, void* const* entries, std::vector<PbHostTensor>& out) {
  out.clear();
  for (int64_t i = 0; i < size; ++i) {
    if (is_token(types[i], entries[i])) continue;
    PbHostTensor t;
    if (!describe(types[i], entries[i], t)) return false;
    out.push_back(t);
  }
  return true;
}

// The stream the plugin runs this call on. False when there is none, with *error set to what the
// handler returns (null only when the plugin's table cannot create errors). An error the runtime
// hands the bridge is the bridge's to destroy: its message is taken, then it is destroyed.
bool stream_of(XLA_FFI_CallFrame* frame, cudaStream_t* stream, XLA_FFI_Error** error) {
  const XLA_FFI_Api* api = frame->api;
  if (api->struct_size < offsetof(XLA_FFI_Api, XLA_FFI_Stream_Get) + sizeof(void*) || !api->XLA_FFI_Stream_Get) {
    *error = fail(api, "plugboard CUDA bridge: the plugin's XLA FFI API has no XLA_FFI_Stream_Get");
    return false;
  }
  XLA_FFI_Stream_Get_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  XLA_FFI_Error* e = api->XLA_FFI_Stream_Get(&args);
  if (!e) {
    *stream = static_cast<cudaStream_t>(args.stream);
    return true;
  }
  char message[1024];
  std::snprintf(message, sizeof(message), "plugboard CUDA bridge: XLA_FFI_Stream_Get failed");
  if (api->struct_size >= offsetof(XLA_FFI_Api, XLA_FFI_Error_GetMessage) + sizeof(void*) &&
      api->XLA_FFI_Error_GetMessage) {
    XLA_FFI_Error_GetMessage_Args get;
    std::memset(&get, 0, sizeof(get));
    get.struct_size = XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE;
    get.error = e;
    api->XLA_FFI_Error_GetMessage(&get);
    if (get.message)
      std::snprintf(message, sizeof(message), "plugboard CUDA bridge: XLA_FFI_Stream_Get failed: %s", get.message);
  }
  if (api->struct_size >= offsetof(XLA_FFI_Api, XLA_FFI_Error_Destroy) + sizeof(void*) && api->XLA_FFI_Error_Destroy) {
    XLA_FFI_Error_Destroy_Args destroy;
    std::memset(&destroy, 0, sizeof(destroy));
    destroy.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
    destroy.error = e;
    api->XLA_FFI_Error_Destroy(&destroy);
  }
  *error = fail(api, message);
  return false;
}

// Waits until no copy queued on `stream` can still touch host memory the caller is about to reuse
// or hand back. False when that cannot be known (the synchronization failed): the memory must then
// never be reused.
bool settle(cudaStream_t stream) { return cudaStreamSynchronize(stream) == cudaSuccess; }

// Pinned memory that one thread reuses from call to call (blocking path): grown, never shrunk.
struct PinnedArena {
  void* base = nullptr;
  size_t capacity = 0;
  ~PinnedArena() {
    if (base) cudaFreeHost(base);
  }
  // Every earlier use of the arena has settled when this is called (each call ends synchronized, or
  // abandons the arena).
  cudaError_t reserve(size_t bytes) {
    if (bytes <= capacity) return cudaSuccess;
    const size_t want = grown_capacity(capacity, bytes);  // computed before capacity is reset
    if (base) cudaFreeHost(base);
    base = nullptr;
    capacity = 0;
    cudaError_t e = cudaMallocHost(&base, want);
    if (e == cudaSuccess) capacity = want;
    else base = nullptr;
    return e;
  }
  // Copies queued on a stream that could not be synchronized may still reach this memory: it is
  // neither freed nor reused (a leak, on a path where the CUDA context is broken anyway).
  void abandon() {
    base = nullptr;
    capacity = 0;
  }
};

// Pinned staging blocks for ordered calls, handed back from the host-function callback (which may
// not call CUDA, so blocks are only ever freed at exit).
struct StagingPool {
  std::mutex mutex;
  std::vector<std::pair<void*, size_t>> free_blocks;
  cudaError_t take(size_t bytes, void** out, size_t* capacity) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (size_t i = 0; i < free_blocks.size(); ++i)
        if (free_blocks[i].second >= bytes) {
          *out = free_blocks[i].first;
          *capacity = free_blocks[i].second;
          free_blocks.erase(free_blocks.begin() + static_cast<long>(i));
          return cudaSuccess;
        }
    }
    size_t want = 0;
    if (!add_aligned(&want, bytes)) return cudaErrorMemoryAllocation;
    *capacity = std::max<size_t>(want, 4096);
    return cudaMallocHost(out, *capacity);
  }
  // Only for a block no queued copy can still write: after its host function ran, or after the stream
  // was synchronized.
  void give(void* block, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex);
    free_blocks.emplace_back(block, capacity);
  }
};
StagingPool& staging_pool() {
  static StagingPool* pool = new StagingPool();  // outlives every stream callback
  return *pool;
}

int available(char* error, size_t error_size) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    std::snprintf(error, error_size, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
  }
  if (count == 0) {
    std::snprintf(error, error_size, "no CUDA device is visible");
    return 1;
  }
  return 0;
}

XLA_FFI_Error* run_blocking(XLA_FFI_CallFrame* frame, const PbHostDispatch* host) {
  const XLA_FFI_Api* api = frame->api;
  cudaStream_t stream = nullptr;
  if (XLA_FFI_Error* e = nullptr; !stream_of(frame, &stream, &e)) return e;
  std::vector<PbHostTensor> operands, results;
  if (!collect(frame->args.size, frame->args.types, frame->args.args, operands))
    return fail(api, "plugboard CUDA bridge: an operand is not an array it can pass on (or its size overflows)");
  if (!collect(frame->rets.size, frame->rets.types, frame->rets.rets, results))
    return fail(api, "plugboard CUDA bridge: a result is not an array it can pass on (or its size overflows)");
  const size_t n = operands.size(), m = results.size();
  std::vector<void*> device_results(m);
  size_t total = 0;
  for (const auto& t : operands)
    if (!add_aligned(&total, t.size_bytes)) return fail(api, "plugboard CUDA bridge: the operands' size overflows");
  for (const auto& t : results)
    if (!add_aligned(&total, t.size_bytes)) return fail(api, "plugboard CUDA bridge: the results' size overflows");
  thread_local PinnedArena arena;
  if (cudaError_t e = arena.reserve(total); e != cudaSuccess) return fail_cuda(api, "cudaMallocHost", e);
  // The arena is this thread's and is reused by its next call: no path may leave a copy that can still
  // touch it. A failure after copies were queued waits for them; if even that fails, the arena is
  // abandoned.
  auto failed_with_copies_queued = [&](XLA_FFI_Error* e) {
    if (!settle(stream)) arena.abandon();
    return e;
  };
  char* cursor = static_cast<char*>(arena.base);
  for (size_t i = 0; i < n; ++i) {
    void* device = operands[i].data;
    operands[i].data = cursor;
    cursor += round_up(operands[i].size_bytes);
    if (operands[i].size_bytes == 0) continue;
    if (cudaError_t e = cudaMemcpyAsync(operands[i].data, device, operands[i].size_bytes, cudaMemcpyDeviceToHost, stream); e != cudaSuccess)
      return failed_with_copies_queued(fail_cuda(api, "cudaMemcpyAsync (operand to host)", e));
  }
  for (size_t i = 0; i < m; ++i) {
    device_results[i] = results[i].data;
    results[i].data = cursor;
    cursor += round_up(results[i].size_bytes);
  }
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    arena.abandon();
    return fail_cuda(api, "cudaStreamSynchronize", e);
  }
  char message[2048] = {0};
  if (host->call(host->ctx, operands.data(), n, results.data(), m, message, sizeof(message)) != 0) return fail(api, message);
  for (size_t i = 0; i < m; ++i) {
    if (results[i].size_bytes == 0) continue;
    if (cudaError_t e = cudaMemcpyAsync(device_results[i], results[i].data, results[i].size_bytes, cudaMemcpyHostToDevice, stream); e != cudaSuccess)
      return failed_with_copies_queued(fail_cuda(api, "cudaMemcpyAsync (result to device)", e));
  }
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    arena.abandon();
    return fail_cuda(api, "cudaStreamSynchronize", e);
  }
  return nullptr;
}

struct OrderedPackage {
  PbHostDispatch host;
  void* block = nullptr;
  size_t capacity = 0;
  std::vector<PbHostTensor> operands;
  std::vector<std::vector<int64_t>> dims;  // the frame's dims do not outlive the handler
};

// Runs on the stream after the copies into the staging block: the block is no longer written to.
// The handler returned long ago, so a failed enqueue cannot be handed back to the plugin: the host
// side records it in the execution (its await() fails with the message), see device_bridge_abi.h.
void CUDART_CB deliver(void* data) {
  auto* p = static_cast<OrderedPackage*>(data);
  char message[512] = {0};
  if (p->host.enqueue(p->host.ctx, p->operands.data(), p->operands.size(), message, sizeof(message)) != 0) {
    // Recorded by the host side already; nothing here may call CUDA or block.
  }
  p->host.release(p->host.ctx);
  staging_pool().give(p->block, p->capacity);
  delete p;
}

XLA_FFI_Error* run_ordered(XLA_FFI_CallFrame* frame, const PbHostDispatch* host) {
  const XLA_FFI_Api* api = frame->api;
  auto* p = new (std::nothrow) OrderedPackage();
  if (!p) {
    host->release(host->ctx);
    return fail(api, "plugboard CUDA bridge: out of memory");
  }
  p->host = *host;
  cudaStream_t stream = nullptr;
  bool copies_queued = false;
  // Fails the call without delivering it. The staging block goes back to the pool only when no copy
  // queued into it can still write: after the stream settles; if it cannot be synchronized, the block
  // is never reused.
  auto abandon = [&](XLA_FFI_Error* e) {
    if (p->block && (!copies_queued || settle(stream))) staging_pool().give(p->block, p->capacity);
    p->host.release(p->host.ctx);
    delete p;
    return e;
  };
  if (XLA_FFI_Error* e = nullptr; !stream_of(frame, &stream, &e)) return abandon(e);
  if (!collect(frame->args.size, frame->args.types, frame->args.args, p->operands))
    return abandon(fail(api, "plugboard CUDA bridge: an operand is not an array it can pass on (or its size overflows)"));
  const size_t n = p->operands.size();
  p->dims.resize(n);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    p->dims[i].assign(p->operands[i].dims, p->operands[i].dims + p->operands[i].rank);
    p->operands[i].dims = p->dims[i].data();
    if (!add_aligned(&total, p->operands[i].size_bytes))
      return abandon(fail(api, "plugboard CUDA bridge: the operands' size overflows"));
  }
  if (cudaError_t e = staging_pool().take(std::max<size_t>(total, 1), &p->block, &p->capacity); e != cudaSuccess) {
    p->block = nullptr;
    return abandon(fail_cuda(api, "cudaMallocHost", e));
  }
  char* cursor = static_cast<char*>(p->block);
  for (size_t i = 0; i < n; ++i) {
    void* device = p->operands[i].data;
    p->operands[i].data = cursor;
    cursor += round_up(p->operands[i].size_bytes);
    if (p->operands[i].size_bytes == 0) continue;
    if (cudaError_t e = cudaMemcpyAsync(p->operands[i].data, device, p->operands[i].size_bytes, cudaMemcpyDeviceToHost, stream); e != cudaSuccess)
      return abandon(fail_cuda(api, "cudaMemcpyAsync (operand to staging)", e));
    copies_queued = true;
  }
  if (cudaError_t e = cudaLaunchHostFunc(stream, &deliver, p); e != cudaSuccess)
    return abandon(fail_cuda(api, "cudaLaunchHostFunc", e));
  return nullptr;  // `deliver` owns the package now
}

const PbDeviceBridge kBridge = {sizeof(PbDeviceBridge), PB_DEVICE_BRIDGE_VERSION, "CUDA", &available, &run_blocking, &run_ordered};

}  // namespace

extern "C" __attribute__((visibility("default"))) const PbDeviceBridge* plugboard_device_bridge(void) { return &kBridge; }
