// Reading files that come from users, bundles and plugins: only regular files, never more than a
// stated limit, never a hang.
//
// A FIFO, a character device (/dev/zero, /dev/urandom), a socket or a directory is refused with its
// kind named, before a single byte is read: opening uses O_NONBLOCK so that a FIFO without a writer
// cannot block the open itself. Reads are capped by the file's own size (fstat) and by the caller's
// limit, so a file that grows while it is read is not followed past its size.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"

namespace plugboard {

struct OpenOptions {
  // O_NOFOLLOW: the last path component must not be a symbolic link (verify-then-load opens this way).
  bool no_follow = false;
};

// What identifies one version of one file: a file replaced, rewritten in place (even with its mtime
// restored: ctime moves) or grown has another identity.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
FileIdentity file_identity(const struct stat& st);
// The same file holding the same bytes, as far as stat can tell: device, inode, size and mtime. A
// ctime that moved alone (a hard link made or removed, a chmod) leaves the contents as they were.
bool same_contents(const FileIdentity& a, const FileIdentity& b);
// stat() of a path (following links); NOT_FOUND or the errno's meaning on failure.
Expected<FileIdentity> file_identity(const std::filesystem::path& path);

// "a FIFO", "a character device", "a directory", ... for the file type bits of st_mode.
std::string_view file_kind(mode_t mode);

// Opens a regular file for reading; the descriptor is blocking again on return. Messages name the path.
Expected<UniqueFd> open_regular_file(const std::filesystem::path& path, OpenOptions options = {});

// The whole content of a regular file of at most max_bytes bytes (RESOURCE_EXHAUSTED beyond it,
// naming the file, its size and the limit).
Expected<std::string> read_regular_file(const std::filesystem::path& path, size_t max_bytes,
                                        OpenOptions options = {});
// Same, from a descriptor already opened (and checked) by open_regular_file.
Expected<std::string> read_regular_file(const UniqueFd& fd, const std::filesystem::path& path, size_t max_bytes);

// Limits used across plugboard for files read whole.
inline constexpr size_t kMaxManifestBytes = size_t{16} << 20;  // plugboard.json, lock files, indexes
inline constexpr size_t kMaxProgramBytes = size_t{1} << 30;    // StableHLO text or bytecode
inline constexpr size_t kMaxArrayBytes = size_t{1} << 36;      // one .npy input or callback result

}  // namespace plugboard
