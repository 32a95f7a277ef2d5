#include "plugin/native_library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <map>
#include <mutex>

#include "base/sha256.h"

namespace plugboard {
namespace {

struct VerifiedFile {
  FileIdentity identity;
  std::string sha256;
};

struct VerifiedFiles {
  std::mutex mu;
  std::map<std::filesystem::path, VerifiedFile> by_path;
};

VerifiedFiles& verified_files() {
  static VerifiedFiles* v = new VerifiedFiles();  // immortal: loads may happen during exit
  return *v;
}

std::filesystem::path canonical_or_absolute(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(path, ec);
  if (!ec) return p;
  p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal();
}

Error changed(const std::string& what, const std::filesystem::path& path, const std::string& when,
              const FileIdentity& expected, const FileIdentity& found) {
  return Error(Code::kDataLoss, what + " " + path.string() + " changed " + when + ": it was " +
                                    describe_identity(expected) + ", it is now " + describe_identity(found) +
                                    "; refusing to use it");
}

}  // namespace

void record_verified_file(const std::filesystem::path& path, const FileIdentity& identity, const std::string& sha256) {
  VerifiedFiles& v = verified_files();
  std::lock_guard lock(v.mu);
  v.by_path[canonical_or_absolute(path)] = {identity, sha256};
}

std::optional<FileIdentity> verified_identity(const std::filesystem::path& path) {
  VerifiedFiles& v = verified_files();
  const std::filesystem::path key = canonical_or_absolute(path);
  std::lock_guard lock(v.mu);
  if (auto it = v.by_path.find(key); it != v.by_path.end()) return it->second.identity;
  return std::nullopt;
}

std::optional<std::string> verified_sha256(const std::filesystem::path& path) {
  VerifiedFiles& v = verified_files();
  std::lock_guard lock(v.mu);
  if (auto it = v.by_path.find(canonical_or_absolute(path)); it != v.by_path.end()) return it->second.sha256;
  return std::nullopt;
}

Status confirm_same_file(const std::filesystem::path& path, const FileIdentity& expected, const FileIdentity& now,
                         const std::optional<std::string>& sha256, const std::string& what, const std::string& when) {
  if (now == expected) return ok();
  const bool metadata_only = now.device == expected.device && now.inode == expected.inode && now.size == expected.size &&
                             now.mtime_ns == expected.mtime_ns;
  if (!metadata_only) return std::unexpected(changed(what, path, when, expected, now));
  if (!sha256) return ok();
  // Only the ctime moved: the bytes decide. Hashed again, through the path dlopen reads.
  auto actual = sha256_file(path);
  if (actual && *actual == *sha256) return ok();
  return std::unexpected(changed(what, path, when + " (its content no longer has the sha256 verified)", expected, now));
}

std::string describe_identity(const FileIdentity& id) {
  return "device " + std::to_string(id.device) + ", inode " + std::to_string(id.inode) + ", " +
         std::to_string(id.size) + " bytes, mtime " + std::to_string(id.mtime_ns) + " ns, ctime " +
         std::to_string(id.ctime_ns) + " ns";
}

Expected<InspectedLibrary> inspect_library(const std::filesystem::path& path, const std::string& what) {
  InspectedLibrary lib;
  lib.canonical = canonical_or_absolute(path);
  auto elf = ElfFile::open(lib.canonical);
  Status loadable = elf ? elf->check_loadable() : Status(std::unexpected(elf.error()));
  if (!loadable) {
    Error e = std::move(loadable).error();
    // A header, segment or section outside the file makes the file an invalid argument like any other
    // malformed one (the message says which part and where).
    if (e.code() == Code::kOutOfRange) e = Error(Code::kInvalidArgument, e.message());
    return std::unexpected(std::move(e).annotate("checking " + what + " " + path.string() + " before loading it"));
  }
  lib.identity = elf->identity();
  lib.verified = verified_identity(lib.canonical);
  if (lib.verified) {
    lib.sha256 = verified_sha256(lib.canonical);
    PB_RETURN_IF_ERROR(confirm_same_file(lib.canonical, *lib.verified, lib.identity, lib.sha256, what,
                                         "between verification and load"));
  }
  return lib;
}

Expected<void*> dlopen_inspected_library(const InspectedLibrary& library) {
  void* handle = ::dlopen(library.canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    return make_error(Code::kFailedPrecondition,
                      "cannot load " + library.canonical.string() + ": " + (why ? why : "dlopen failed"));
  }
  return handle;
}

Expected<void*> open_inspected_library(const InspectedLibrary& library, const std::string& what) {
  PB_ASSIGN_OR_RETURN(void* handle, dlopen_inspected_library(library));
  PB_RETURN_IF_ERROR(check_loaded_identity(library, what));
  return handle;
}

Status check_loaded_identity(const InspectedLibrary& library, const std::string& what) {
  // The path dlopen read must still be the file inspected (and verified): a file replaced or rewritten
  // in the meantime has another device, inode, size, mtime or ctime.
  auto now = file_identity(library.canonical);
  if (!now) return std::unexpected(std::move(now).error().annotate("after loading " + what + " " + library.canonical.string()));
  const FileIdentity& expected = library.verified ? *library.verified : library.identity;
  return confirm_same_file(library.canonical, expected, *now, library.sha256, what,
                           library.verified ? "between verification and load" : "while it was being loaded");
}

}  // namespace plugboard
