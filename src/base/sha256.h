// SHA-256 of bytes and of files, as lowercase hex (what sha256sum, pip's --hash and wheels' RECORD use).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

#include "base/status.h"

namespace plugboard {

std::string sha256_hex(std::span<const std::byte> data);

// Reads the file in 1 MiB blocks; `progress(done, total)` (optional) is called after each block.
// Only a regular file is read (base/regular_file.h: a FIFO is refused, never waited on). Errors name
// the file.
Expected<std::string> sha256_file(const std::filesystem::path& path,
                                  const std::function<void(uint64_t, uint64_t)>& progress = {});
// The same, of the file an open descriptor holds (from its start, whatever its offset), so that the
// bytes hashed are that file's whatever its path names meanwhile; `path` names it in errors.
Expected<std::string> sha256_fd(int fd, const std::filesystem::path& path,
                                const std::function<void(uint64_t, uint64_t)>& progress = {});

// True for 64 lowercase hex digits.
bool is_sha256_hex(std::string_view s);

}  // namespace plugboard
