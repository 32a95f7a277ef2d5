// Stamps: a file's sha256 remembered by the file's identity, so that a file hashed once (a 400 MB
// plugin takes seconds) is not hashed again while it stays the same file. One stamp file per path,
// named by the hash of the path, holding "plugboard-stamp 2 SIZE MTIME CTIME INODE DEVICE SHA256 PATH".
// A stamp vouches only for the exact identity it records: a file replaced, rewritten in place (ctime
// moves even when mtime is restored) or grown has another identity and is hashed again.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/regular_file.h"

namespace plugboard {

// $XDG_CACHE_HOME/plugboard/stamps (or ~/.cache/plugboard/stamps).
std::filesystem::path default_stamp_dir();

// The sha256 the stamp in `stamp_dir` records for `file`, when it records exactly `identity`.
std::optional<std::string> stamped_sha256(const std::filesystem::path& stamp_dir, const std::filesystem::path& file,
                                          const FileIdentity& identity);

// Records `sha256` for `file` as it is (`identity`). A stamp that cannot be written only costs a
// re-hash next time: failures are ignored.
void write_hash_stamp(const std::filesystem::path& stamp_dir, const std::filesystem::path& file,
                      const FileIdentity& identity, const std::string& sha256);

}  // namespace plugboard
