// Warm host memory for copies into device buffers that alias it (CPU plugins): blocks mapped once,
// backed by huge pages where the kernel offers them (MADV_HUGEPAGE), every page faulted in before
// first use, and kept for the next copy of the same size instead of being unmapped. A copy into a
// warm block runs at memcpy speed; a fresh allocation per copy pays the page faults (about 5x slower
// for 64 MiB here).
//
// Blocks are handed out as shared_ptr: the last owner (the plugin's done-with-host-memory event,
// through Client::buffer_from_host_pooled) gives the block back. Thread-safe; blocks may be given
// back from any thread, also after the pool object is gone (they are then unmapped).
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "base/status.h"

namespace plugboard {

struct HostBlockPoolStats {
  size_t blocks_mapped = 0;  // blocks that exist now (in use or kept)
  size_t blocks_in_use = 0;
  size_t bytes_kept = 0;     // bytes of blocks kept for reuse (not in use)
  size_t reuses = 0;         // acquisitions served by a kept block
};

class HostBlockPool {
 public:
  // `keep_limit_bytes`: kept (idle) blocks beyond this are unmapped when given back.
  explicit HostBlockPool(size_t keep_limit_bytes = size_t{1} << 30);
  ~HostBlockPool();
  HostBlockPool(const HostBlockPool&) = delete;
  HostBlockPool& operator=(const HostBlockPool&) = delete;

  // A block of at least `bytes` (rounded up to whole pages; 64-byte aligned, page aligned in fact),
  // every page already faulted in. RESOURCE_EXHAUSTED when the system has no memory for it.
  Expected<std::shared_ptr<std::byte>> acquire(size_t bytes) noexcept;
  // The size acquire(bytes) gives.
  static size_t block_size(size_t bytes);

  HostBlockPoolStats stats() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace plugboard
