// Runtime-internal: plugboard's NamedValues as the PJRT structs that client and topology creation take.
#pragma once

#include <vector>

#include "abi/api.h"
#include "plugin/plugin.h"

namespace plugboard::internal {

// PJRT NamedValues pointing into `options`, which must outlive them.
std::vector<PJRT_NamedValue> to_pjrt(const std::vector<NamedValue>& options);

}  // namespace plugboard::internal
