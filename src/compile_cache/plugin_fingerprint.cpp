#include "compile_cache/plugin_fingerprint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "base/hash_stamp.h"
#include "base/no_throw.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "plugin/native_library.h"

namespace plugboard::compile_cache {
namespace {

using Remembered = HashedFile;

// This process's answers, by path (immortal, like the loaded-plugin table).
struct Memo {
  std::mutex mu;
  std::map<std::filesystem::path, Remembered> by_path;
};
Memo& memo() {
  static Memo* m = new Memo();
  return *m;
}

}  // namespace

Expected<HashedFile> hash_file(const std::filesystem::path& path) {
  PB_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return make_error(Code::kUnknown, "cannot stat " + path.string() + ": " + std::strerror(errno));
  const FileIdentity id = file_identity(st);
  PB_ASSIGN_OR_RETURN(std::string sha, sha256_fd(fd.get(), path));
  struct stat after {};
  // A hard link made meanwhile (another process assembling a bundle) moves only the ctime.
  if (::fstat(fd.get(), &after) != 0 || !same_contents(file_identity(after), id))
    return make_error(Code::kDataLoss, "plugin " + path.string() + " changed while it was being hashed");
  return HashedFile{id, std::move(sha)};
}

Expected<std::string> plugin_sha256(const Plugin& plugin) noexcept {
  return no_throw("identifying a plugin", [&]() -> Expected<std::string> {
    const std::filesystem::path& path = plugin.path();
    PB_ASSIGN_OR_RETURN(const FileIdentity now, file_identity(path));
    // The key must name the build in memory: a file replaced or rewritten since it was loaded
    // (an upgrade under a running process) is not what this process runs. A ctime that moved alone
    // (a hard link, a chmod) is the same content.
    if (!same_contents(plugin.file_identity(), now))
      return make_error(Code::kFailedPrecondition, "plugin " + path.string() + " changed since this process loaded it (" +
                                                       describe_identity(plugin.file_identity()) + ", now " +
                                                       describe_identity(now) + ")");
    // Answers remembered for an identity are used only while the identity is exactly that one (a
    // ctime that moved means a rehash: an in-place rewrite can restore the mtime).
    if (auto id = verified_identity(path); id && *id == now)
      if (auto sha = verified_sha256(path)) return *sha;
    Memo& m = memo();
    {
      std::lock_guard lock(m.mu);
      if (auto it = m.by_path.find(path); it != m.by_path.end() && it->second.identity == now) return it->second.sha256;
    }
    const std::filesystem::path stamps = default_stamp_dir();
    Remembered found;
    if (auto sha = stamped_sha256(stamps, path, now)) {
      found = {now, *sha};
    } else {
      PB_ASSIGN_OR_RETURN(found, annotate(hash_file(path), "identifying plugin " + path.string() + " for the compile cache"));
      write_hash_stamp(stamps, path, found.identity, found.sha256);
    }
    std::lock_guard lock(m.mu);
    m.by_path[path] = found;
    return found.sha256;
  });
}

}  // namespace plugboard::compile_cache
