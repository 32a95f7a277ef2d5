// How the VM's C heap treats large blocks, set when the library loads.
//
// ERTS sets glibc's trim threshold at boot (erts_alloc's +MYtt, 128 KiB unless given), and setting
// it turns off glibc's adaptive thresholds for good: every block of 128 KiB or more is then mapped
// fresh and unmapped when freed. A CPU plugin allocates each output and temporary buffer of an
// execution with malloc, so in the VM every execution paid for new mappings, and its kernels for a
// page fault and a zeroed page per 4 KiB they first touched: a run with a MiB output faulted all 256
// of its pages each time (test/host_memory_test.exs), where a process that left glibc adaptive (JAX's
// Python) reuses its blocks. Put back what glibc's adaptive threshold settles on for such blocks: up
// to 32 MiB they come from the heap and are reused, and up to 64 MiB of free heap is kept rather than
// returned. Measured with bindings/elixir/plugboard_nx/bench/jax_bench.exs on the 0.115 plugin: an
// MLP training step's CPU time went from 1.50x JAX's to 1.13x, a transformer block's from 1.29x to
// 1.05x. Left alone where the user tuned malloc in the environment (MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES).
#pragma once

#include <cstdlib>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace plugboard::nif {

inline void keep_large_blocks_in_the_heap() {
#if defined(__GLIBC__)
  for (const char* tuned : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"})
    if (std::getenv(tuned) != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest (its adaptive threshold's ceiling)
  mallopt(M_TRIM_THRESHOLD, 64 << 20);  // twice it, as glibc's adaptive rule keeps it
#endif
}

}  // namespace plugboard::nif
