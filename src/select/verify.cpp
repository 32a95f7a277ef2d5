#include "select/verify.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "base/sha256.h"

namespace plugboard::select {
namespace {

struct FileIdentity {
  uint64_t size = 0, inode = 0, device = 0;
  int64_t mtime_ns = 0;
  std::string line(const std::filesystem::path& path, const std::string& sha) const {
    std::ostringstream s;
    s << "plugboard-stamp 1 " << size << ' ' << mtime_ns << ' ' << inode << ' ' << device << ' ' << sha << ' '
      << path.string() << '\n';
    return s.str();
  }
};

Expected<FileIdentity> identity(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(Code::kNotFound, "plugin file " + path.string() + " cannot be read: " + std::strerror(errno));
  return FileIdentity{static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_dev),
                      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// One stamp file per plugin path, named by the hash of the path.
std::filesystem::path stamp_path(const std::filesystem::path& dir, const std::filesystem::path& file) {
  const std::string key = file.string();
  return dir / (sha256_hex(std::as_bytes(std::span(key.data(), key.size()))).substr(0, 32) + ".stamp");
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_stamp(const std::filesystem::path& dir, const std::filesystem::path& file, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path final_path = stamp_path(dir, file);
  const std::filesystem::path tmp = final_path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;  // a stamp that cannot be written only costs a re-hash next time
    }
  }
  std::filesystem::rename(tmp, final_path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

std::filesystem::path default_stamp_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path base = xdg && *xdg ? std::filesystem::path(xdg)
                               : home      ? std::filesystem::path(home) / ".cache"
                                           : std::filesystem::temp_directory_path();
  return base / "plugboard" / "stamps";
}

namespace {

// One file against its expected size and sha256; `hashed` tells whether it was read in full.
Expected<bool> verify_file(const std::filesystem::path& path, std::optional<uint64_t> size, const std::string& sha256,
                           const std::string& source, const VerifyOptions& options) {
  PB_ASSIGN_OR_RETURN(FileIdentity id, identity(path));
  if (size && *size != id.size)
    return make_error(Code::kDataLoss, path.string() + " is " + std::to_string(id.size) + " bytes, but " + source + " says " +
                                           std::to_string(*size) + " (size): the file was changed or truncated");
  const std::string expected_line = id.line(path, sha256);
  if (!options.rehash && !options.stamp_dir.empty() && read_all(stamp_path(options.stamp_dir, path)) == expected_line)
    return false;
  PB_ASSIGN_OR_RETURN(std::string actual, sha256_file(path));
  if (actual != sha256)
    return make_error(Code::kDataLoss, path.string() + " has sha256 " + actual + ", but " + source + " says " + sha256 +
                                           " (sha256): the file was changed; refusing to load it");
  // Re-read the identity: a file replaced while it was hashed must not get a stamp for the old bytes.
  PB_ASSIGN_OR_RETURN(FileIdentity after, identity(path));
  if (!options.stamp_dir.empty() && after.line(path, actual) == expected_line)
    write_stamp(options.stamp_dir, path, expected_line);
  return true;
}

}  // namespace

Expected<Verified> verify_candidate(const Candidate& candidate, const VerifyOptions& options) {
  if (!candidate.sha256) {
    PB_RETURN_IF_ERROR(identity(candidate.path));
    return Verified{false, "no checksum to verify (from " + candidate.source + ")"};
  }
  PB_ASSIGN_OR_RETURN(bool hashed, verify_file(candidate.path, candidate.size, *candidate.sha256, candidate.source, options));
  uint64_t bytes = hashed ? std::filesystem::file_size(candidate.path) : 0;
  for (const ExpectedFile& f : candidate.companions) {
    PB_ASSIGN_OR_RETURN(bool h, annotate(verify_file(f.path, f.size, f.sha256, candidate.source, options),
                                         "verifying a companion library of " + candidate.name));
    if (h) bytes += f.size;
    hashed = hashed || h;
  }
  std::string detail = "sha256 matches";
  if (!candidate.companions.empty()) detail += " (and " + std::to_string(candidate.companions.size()) + " companion files)";
  detail += hashed ? " (hashed " + std::to_string(bytes >> 20) + " MiB)" : " (stamp: same size, mtime and inode as when hashed)";
  return Verified{hashed, detail};
}

}  // namespace plugboard::select
