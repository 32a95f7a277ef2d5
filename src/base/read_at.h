// The one pread loop: reads at an offset until the buffer is full or the file ends, through EINTR and
// short reads. Callers decide what a short count means (a file that shrank, the end of a stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace plugboard {

// Reads into `dst` from `fd` at `offset`; returns the bytes read, fewer than dst.size() only when the
// file ended first. A read error is errno_error(errno, what) (base/errno_error.h), e.g. what =
// "cannot read /x/y.npy".
Expected<size_t> read_at(int fd, std::span<std::byte> dst, uint64_t offset, std::string_view what);

}  // namespace plugboard
