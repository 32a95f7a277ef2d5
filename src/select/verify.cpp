#include "select/verify.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "base/hash_stamp.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "plugin/native_library.h"

namespace plugboard::select {
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
  if (!options.rehash && stamped_sha256(options.stamp_dir, path, id) == sha256) {
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
  write_hash_stamp(options.stamp_dir, path, id, sha256);
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
