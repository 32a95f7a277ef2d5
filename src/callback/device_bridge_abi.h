/* The C interface between plugboard's FFI handler and a device bridge: a small shared object, built
 * against one vendor runtime (CUDA: cuda/cuda_bridge.cu), that moves a callback's operands from the
 * device to host memory and its results back, on the stream the plugin hands the handler. The base
 * library never links a vendor runtime; it loads a bridge only for a client of that vendor's plugin.
 *
 * Plain C, so the bridge can be built by another compiler (nvcc) and versioned on its own. */
#ifndef PLUGBOARD_DEVICE_BRIDGE_ABI_H_
#define PLUGBOARD_DEVICE_BRIDGE_ABI_H_

#include <stddef.h>
#include <stdint.h>
#include <xla/ffi/api/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PB_DEVICE_BRIDGE_VERSION 1

/* One array in host memory (operands: filled by the bridge; results: host buffers the host side
 * writes and the bridge copies back). dtype is an XLA_FFI_DataType. */
typedef struct PbHostTensor {
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
  void* data;
  size_t size_bytes;
} PbHostTensor;

/* The host side of one call, handed to the bridge by plugboard. Each function returns 0 on success;
 * on failure it writes a message (NUL-terminated, truncated to error_size) and returns non-zero. */
typedef struct PbHostDispatch {
  void* ctx;
  /* Blocking: runs the host function on operands already in host memory; it fills `results`. */
  int (*call)(void* ctx, const PbHostTensor* operands, size_t num_operands, PbHostTensor* results,
              size_t num_results, char* error, size_t error_size);
  /* Ordered: copies the operands and queues the host function; returns at once. The bridge calls it
   * after the handler has returned (CUDA: from the stream's host function), when no error can reach
   * the plugin any more: a failure (a refused operand, no memory) is recorded in the execution by the
   * host side itself, so the execution's await() fails with it; the bridge need not report it. */
  int (*enqueue)(void* ctx, const PbHostTensor* operands, size_t num_operands, char* error, size_t error_size);
  /* Ordered: the bridge calls this exactly once per ordered call, after enqueue or instead of it. */
  void (*release)(void* ctx);
} PbHostDispatch;

typedef struct PbDeviceBridge {
  size_t struct_size;
  int32_t version;      /* PB_DEVICE_BRIDGE_VERSION */
  const char* platform; /* the FFI platform it serves: "CUDA" */
  /* 0 when the vendor runtime and a device are usable here; otherwise the reason. */
  int (*available)(char* error, size_t error_size);
  /* Copies operands device->host on the handler's stream, synchronizes, calls host->call, copies the
   * results host->device and synchronizes. */
  XLA_FFI_Error* (*run_blocking)(XLA_FFI_CallFrame* frame, const PbHostDispatch* host);
  /* Copies operands into pinned staging on the stream and enqueues host->enqueue on it, so the stream
   * does not wait for the host. */
  XLA_FFI_Error* (*run_ordered)(XLA_FFI_CallFrame* frame, const PbHostDispatch* host);
} PbDeviceBridge;

/* The symbol plugboard looks up in a bridge library. */
typedef const PbDeviceBridge* PbGetDeviceBridge(void);
const PbDeviceBridge* plugboard_device_bridge(void);

#ifdef __cplusplus
}
#endif

#endif /* PLUGBOARD_DEVICE_BRIDGE_ABI_H_ */
