#include "base/host_block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace plugboard {

struct HostBlockPool::State {
  explicit State(size_t limit) : keep_limit(limit) {}
  ~State() {
    for (auto& [size, blocks] : kept)
      for (void* p : blocks) ::munmap(p, size);
  }
  const size_t keep_limit;
  bool open = true;  // false once the pool object is gone: blocks given back are unmapped
  mutable std::mutex mu;
  std::map<size_t, std::vector<void*>> kept;  // idle blocks by size
  HostBlockPoolStats stats;
};

namespace {

size_t page_size() {
  static const size_t size = [] {
    const long s = ::sysconf(_SC_PAGESIZE);
    return s > 0 ? static_cast<size_t>(s) : size_t{4096};
  }();
  return size;
}

// A fresh mapping with every page faulted in (huge pages asked for first, where the kernel has them).
Expected<void*> map_warm(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return make_error(Code::kResourceExhausted,
                      "cannot map " + std::to_string(size) + " bytes of host memory: " + std::strerror(errno));
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, size, MADV_HUGEPAGE);  // a hint: refused where transparent huge pages are off
#endif
  bool populated = false;
#ifdef MADV_POPULATE_WRITE
  populated = ::madvise(p, size, MADV_POPULATE_WRITE) == 0;  // Linux 5.14+
#endif
  if (!populated) {
    auto* bytes = static_cast<volatile std::byte*>(p);
    for (size_t off = 0; off < size; off += page_size()) bytes[off] = std::byte{0};
  }
  return p;
}

}  // namespace

HostBlockPool::HostBlockPool(size_t keep_limit_bytes) : state_(std::make_shared<State>(keep_limit_bytes)) {}

HostBlockPool::~HostBlockPool() {
  std::lock_guard lock(state_->mu);
  state_->open = false;
  for (auto& [size, blocks] : state_->kept) {
    for (void* p : blocks) ::munmap(p, size);
    state_->stats.blocks_mapped -= blocks.size();
  }
  state_->kept.clear();
  state_->stats.bytes_kept = 0;
}

size_t HostBlockPool::block_size(size_t bytes) {
  const size_t page = page_size();
  return bytes == 0 ? page : (bytes + page - 1) / page * page;
}

Expected<std::shared_ptr<std::byte>> HostBlockPool::acquire(size_t bytes) noexcept {
  const size_t size = block_size(bytes);
  if (size < bytes) return make_error(Code::kOutOfRange, "a host block of " + std::to_string(bytes) + " bytes is too large");
  void* block = nullptr;
  {
    std::lock_guard lock(state_->mu);
    if (auto it = state_->kept.find(size); it != state_->kept.end() && !it->second.empty()) {
      block = it->second.back();
      it->second.pop_back();
      state_->stats.bytes_kept -= size;
      ++state_->stats.reuses;
      ++state_->stats.blocks_in_use;
    }
  }
  if (!block) {
    auto mapped = map_warm(size);
    if (!mapped) return std::unexpected(std::move(mapped).error());
    block = *mapped;
    std::lock_guard lock(state_->mu);
    ++state_->stats.blocks_mapped;
    ++state_->stats.blocks_in_use;
  }
  // Given back by its last owner: kept while the pool is open and under its limit, else unmapped.
  // Never throws (it runs in a shared_ptr destructor, on whatever thread releases the block last).
  auto give_back = [state = state_, size](std::byte* p) noexcept {
    std::unique_lock lock(state->mu);
    --state->stats.blocks_in_use;
    if (state->open && state->stats.bytes_kept + size <= state->keep_limit) {
      try {
        state->kept[size].push_back(p);
        state->stats.bytes_kept += size;
        return;
      } catch (...) {  // no memory to remember it: unmap it instead
      }
    }
    --state->stats.blocks_mapped;
    lock.unlock();
    ::munmap(p, size);
  };
  try {
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(block), give_back);
  } catch (const std::bad_alloc&) {
    // The shared_ptr constructor has already given the block back through give_back.
    return make_error(Code::kResourceExhausted, "out of memory for a host block's owner");
  }
}

HostBlockPoolStats HostBlockPool::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

}  // namespace plugboard
