// plugboard's LAPACK kernels (kernels.h) made callable on a client's plugin.
#pragma once

#include "base/status.h"
#include "runtime/client.h"

namespace plugboard {

// Registers every LAPACK kernel's target on `client`'s plugin (once per plugin; later calls cost a
// lookup). Host (CPU) plugins only: UNIMPLEMENTED naming the platform elsewhere; NOT_FOUND when
// LAPACK cannot be opened (library.h). Must come before compiling programs that call them.
Status declare_lapack(const Client& client) noexcept;

}  // namespace plugboard
