// TempFile / TempDir: mkstemp / mkdtemp with removal on every path that does not commit.
#include "fetch/temp_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace plugboard::fetch {
namespace {

std::unexpected<Error> errno_error(const std::string& what, int err) {
  return make_error(err == ENOENT ? Code::kNotFound : err == EACCES ? Code::kPermissionDenied : Code::kInternal,
                    what + ": " + std::strerror(err));
}

}  // namespace

Expected<TempFile> TempFile::create(const std::filesystem::path& dir, std::string_view prefix) {
  std::string name = (dir / (std::string(prefix) + "XXXXXX")).string();
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return errno_error("cannot create a temporary file in " + dir.string(), errno);
  return TempFile(fd, std::move(name));
}

TempFile::TempFile(TempFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::exchange(other.path_, {})) {}

TempFile& TempFile::operator=(TempFile&& other) noexcept {
  if (this != &other) {
    discard();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

TempFile::~TempFile() { discard(); }

void TempFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty()) ::unlink(path_.c_str());
  fd_ = -1;
  path_.clear();
}

Status TempFile::write_all(std::span<const std::byte> data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("cannot write " + path_.string(), errno);
    data = data.subspan(static_cast<size_t>(n));
  }
  return ok();
}

Status TempFile::commit(const std::filesystem::path& destination, mode_t mode) {
  if (::fchmod(fd_, mode) != 0) return errno_error("cannot chmod " + path_.string(), errno);
  if (::fsync(fd_) != 0) return errno_error("cannot sync " + path_.string(), errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return errno_error("cannot close " + path_.string(), errno);
  if (::rename(path_.c_str(), destination.c_str()) != 0)
    return errno_error("cannot move " + path_.string() + " to " + destination.string(), errno);
  path_.clear();
  return fsync_dir(destination.parent_path().empty() ? "." : destination.parent_path());
}

Expected<TempDir> TempDir::create(const std::filesystem::path& parent, std::string_view prefix) {
  std::string name = (parent / (std::string(prefix) + "XXXXXX")).string();
  if (::mkdtemp(name.data()) == nullptr)
    return errno_error("cannot create a temporary folder in " + parent.string(), errno);
  return TempDir(std::move(name));
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Status fsync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("cannot open folder " + dir.string(), errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return errno_error("cannot sync folder " + dir.string(), err);
  return ok();
}

}  // namespace plugboard::fetch
