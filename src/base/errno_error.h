// The one mapping from an errno value to an Error: the canonical code that says what kind of failure
// it is (NOT_FOUND for ENOENT, PERMISSION_DENIED for EACCES, RESOURCE_EXHAUSTED for ENOSPC, ...) and a
// message "<what>: <strerror>".
#pragma once

#include <expected>
#include <string_view>

#include "base/status.h"

namespace plugboard {

// The code for `err`; UNKNOWN for an errno value without a closer meaning.
Code code_from_errno(int err);

// Error(code_from_errno(err), "<what>: <strerror(err)>"), e.g. errno_error(errno, "cannot open " + path).
std::unexpected<Error> errno_error(int err, std::string_view what);

}  // namespace plugboard
