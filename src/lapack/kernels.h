// plugboard's LAPACK kernels as XLA FFI handlers: what a program running on a CPU plugin calls
// through `stablehlo.custom_call @<target>` (api_version = 4), once targets.h has registered them.
// Arrays are row-major, batched over leading axes; each handler runs on the plugin's thread and
// calls nothing back.
//
//   plugboard_lapack_ssyevd / _dsyevd   a {..., n, n} (symmetric: the lower triangle of its
//       transpose is read) -> w {..., n} ascending, v {..., n, n} (eigenvectors as columns)
//   plugboard_lapack_sgesdd / _dgesdd   a {..., m, n} -> u {..., m, m|k}, s {..., k} descending,
//       vt {..., n|k, n} (k = min(m, n); full or reduced as the results' shapes say)
//
// LAPACK's "did not converge" (info > 0) fills that matrix's results with NaN, as jax does; so does a
// matrix holding a NaN or an infinity, which is not handed to LAPACK (gesdd refuses it: info -4).
// Workspace sizes: workspace.h.
#pragma once

#include <span>

#include "abi/ffi.h"

namespace plugboard::lapack {

struct Kernel {
  const char* target;
  XLA_FFI_Handler* handler;
};

std::span<const Kernel> kernels();

}  // namespace plugboard::lapack
