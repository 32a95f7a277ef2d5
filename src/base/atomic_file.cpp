// AtomicFile: mkostemp in the destination's folder, removal on every path that does not commit.
#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/errno_error.h"

namespace plugboard {
namespace {

std::filesystem::path folder_of(const std::filesystem::path& file) {
  return file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
}

}  // namespace

Expected<AtomicFile> AtomicFile::create(const std::filesystem::path& dir, std::string_view prefix) {
  std::string name = (dir / (std::string(prefix) + "XXXXXX")).string();
  UniqueFd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd) return errno_error(errno, "cannot create a temporary file in " + dir.string());
  return AtomicFile(std::move(fd), std::move(name));
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : fd_(std::move(other.fd_)), path_(std::exchange(other.path_, {})) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    discard();
    fd_ = std::move(other.fd_);
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  fd_.reset();
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
}

Status AtomicFile::write_all(std::span<const std::byte> data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd_.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "cannot write " + path_.string());
    data = data.subspan(static_cast<size_t>(n));
  }
  return ok();
}

Status AtomicFile::commit(const std::filesystem::path& destination, mode_t mode) {
  if (::fchmod(fd_.get(), mode) != 0) return errno_error(errno, "cannot chmod " + path_.string());
  if (::fsync(fd_.get()) != 0) return errno_error(errno, "cannot sync " + path_.string());
  if (fd_.close_and_report() != 0) return errno_error(errno, "cannot close " + path_.string());
  if (::rename(path_.c_str(), destination.c_str()) != 0)
    return errno_error(errno, "cannot move " + path_.string() + " to " + destination.string());
  path_.clear();
  return fsync_dir(folder_of(destination));
}

Status write_file_atomically(const std::filesystem::path& destination, std::span<const std::byte> bytes, mode_t mode) {
  PB_ASSIGN_OR_RETURN(AtomicFile file,
                      AtomicFile::create(folder_of(destination), "." + destination.filename().string() + ".tmp-"));
  PB_RETURN_IF_ERROR(file.write_all(bytes));
  return file.commit(destination, mode);
}

Status move_file_durably(const std::filesystem::path& from, const std::filesystem::path& to) {
  {
    UniqueFd fd(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return errno_error(errno, "cannot open " + from.string());
    if (::fsync(fd.get()) != 0) return errno_error(errno, "cannot sync " + from.string());
  }
  if (::rename(from.c_str(), to.c_str()) != 0) return errno_error(errno, "cannot move " + from.string() + " to " + to.string());
  return fsync_dir(folder_of(to));
}

Status fsync_dir(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return errno_error(errno, "cannot open folder " + dir.string());
  if (::fsync(fd.get()) != 0) return errno_error(errno, "cannot sync folder " + dir.string());
  return ok();
}

}  // namespace plugboard
