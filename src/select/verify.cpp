#include "select/verify.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/environment.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "plugin/native_library.h"

namespace plugboard::select {
namespace {

// The stamp's line: every part of the identity, ctime included (a file rewritten in place with its
// mtime restored still gets a new ctime), the sha256 and the path.
std::string stamp_line(const FileIdentity& id, const std::filesystem::path& path, const std::string& sha) {
  std::ostringstream s;
  s << "plugboard-stamp 2 " << id.size << ' ' << id.mtime_ns << ' ' << id.ctime_ns << ' ' << id.inode << ' '
    << id.device << ' ' << sha << ' ' << path.string() << '\n';
  return s.str();
}

// One stamp file per plugin path, named by the hash of the path.
std::filesystem::path stamp_path(const std::filesystem::path& dir, const std::filesystem::path& file) {
  const std::string key = file.string();
  return dir / (sha256_hex(std::as_bytes(std::span(key.data(), key.size()))).substr(0, 32) + ".stamp");
}

// A stamp is small; anything unreadable, not a regular file or too large counts as no stamp.
std::string read_stamp(const std::filesystem::path& p) {
  auto text = read_regular_file(p, 64 << 10, OpenOptions{.no_follow = true});
  return text ? *text : std::string();
}

void write_stamp(const std::filesystem::path& dir, const std::filesystem::path& file, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path final_path = stamp_path(dir, file);
  // A stamp that cannot be written only costs a re-hash next time.
  (void)write_file_atomically(final_path, text, 0644);
}

}  // namespace

std::filesystem::path default_stamp_dir() {
  const auto xdg = environment_override("XDG_CACHE_HOME");
  const auto home = environment_override("HOME");
  std::filesystem::path base = xdg    ? std::filesystem::path(*xdg)
                               : home ? std::filesystem::path(*home) / ".cache"
                                      : std::filesystem::temp_directory_path();
  return base / "plugboard" / "stamps";
}

namespace {

// How one file was found to have its expected size and sha256.
enum class FileCheck { kStamp, kHashed };

// One file against its expected size and sha256.
// The file is opened once (O_NOFOLLOW), its identity taken from that descriptor, and the bytes hashed
// are that descriptor's: a path swapped meanwhile cannot slip other bytes in. The identity hashed is
// recorded for the loader (plugin/native_library.h), which refuses the file if it is not that one.
Expected<FileCheck> verify_file(const std::filesystem::path& path, std::optional<uint64_t> size, const std::string& sha256,
                           const std::string& source, const VerifyOptions& options) {
  PB_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path, OpenOptions{.no_follow = true}));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return make_error(Code::kUnknown, "cannot stat " + path.string() + ": " + std::strerror(errno));
  const FileIdentity id = file_identity(st);
  if (size && *size != id.size)
    return make_error(Code::kDataLoss, path.string() + " is " + std::to_string(id.size) + " bytes, but " + source + " says " +
                                           std::to_string(*size) + " (size): the file was changed or truncated");
  const std::string expected_line = stamp_line(id, path, sha256);
  if (!options.rehash && !options.stamp_dir.empty() && read_stamp(stamp_path(options.stamp_dir, path)) == expected_line) {
    record_verified_file(path, id, sha256);
    return FileCheck::kStamp;
  }
  // The descriptor's bytes, whatever the path now names.
  PB_ASSIGN_OR_RETURN(std::string actual, annotate(sha256_fd(fd.get(), path), "hashing " + path.string()));
  if (actual != sha256)
    return make_error(Code::kDataLoss, path.string() + " has sha256 " + actual + ", but " + source + " says " + sha256 +
                                           " (sha256): the file was changed; refusing to load it");
  // The file must not have changed while it was hashed (written in place), and the path must still
  // name it (not replaced): otherwise the bytes hashed are not the bytes that would be loaded.
  // (A ctime that moved alone, from a hard link or a chmod, is held to the hash: confirm_same_file.)
  struct stat after {};
  if (::fstat(fd.get(), &after) != 0)
    return make_error(Code::kDataLoss, path.string() + " changed while it was being hashed; refusing to load it");
  PB_RETURN_IF_ERROR(confirm_same_file(path, id, file_identity(after), sha256, "plugin file", "while it was being hashed"));
  auto now = file_identity(path);
  if (!now) return make_error(Code::kDataLoss, path.string() + " was removed while it was being hashed; refusing to load it");
  PB_RETURN_IF_ERROR(confirm_same_file(path, id, *now, sha256, "plugin file", "while it was being hashed (replaced)"));
  if (!options.stamp_dir.empty()) write_stamp(options.stamp_dir, path, expected_line);
  record_verified_file(path, id, sha256);
  return FileCheck::kHashed;
}

}  // namespace

Expected<Verified> verify_candidate(const Candidate& candidate, const VerifyOptions& options) {
  if (!candidate.sha256) {
    PB_RETURN_IF_ERROR(file_identity(candidate.path));
    return Verified{Verification::kNoChecksum, "no checksum to verify (from " + candidate.source + ")"};
  }
  PB_ASSIGN_OR_RETURN(const FileCheck plugin,
                      verify_file(candidate.path, candidate.size, *candidate.sha256, candidate.source, options));
  bool hashed = plugin == FileCheck::kHashed;
  uint64_t bytes = hashed && candidate.size ? *candidate.size : 0;
  for (const ExpectedFile& f : candidate.companions) {
    PB_ASSIGN_OR_RETURN(const FileCheck companion, annotate(verify_file(f.path, f.size, f.sha256, candidate.source, options),
                                                            "verifying a companion library of " + candidate.name));
    if (companion == FileCheck::kHashed) {
      bytes += f.size;
      hashed = true;
    }
  }
  std::string detail = "sha256 matches";
  if (!candidate.companions.empty()) detail += " (and " + std::to_string(candidate.companions.size()) + " companion files)";
  detail += hashed ? " (hashed " + std::to_string(bytes >> 20) + " MiB)" : " (stamp: same size, mtime, ctime and inode as when hashed)";
  return Verified{hashed ? Verification::kHashed : Verification::kStampVouched, detail};
}

}  // namespace plugboard::select
