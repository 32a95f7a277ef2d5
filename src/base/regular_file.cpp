#include "base/regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "base/errno_error.h"
#include "base/read_at.h"

namespace plugboard {
namespace {

// "<doing> <path>: <reason>". ELOOP means "the last component is a symlink" only under O_NOFOLLOW;
// otherwise it is a symlink loop.
Error path_error(int err, std::string_view doing, const std::filesystem::path& path, bool no_follow = false) {
  if (err == ELOOP && no_follow)
    return Error(Code::kInvalidArgument, std::string(doing) + " " + path.string() + ": is a symbolic link, refused");
  return errno_error(err, std::string(doing) + " " + path.string()).error();
}

}  // namespace

FileIdentity file_identity(const struct stat& st) {
  return FileIdentity{static_cast<uint64_t>(st.st_dev),
                      static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size),
                      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                      static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

bool same_contents(const FileIdentity& a, const FileIdentity& b) {
  return a.device == b.device && a.inode == b.inode && a.size == b.size && a.mtime_ns == b.mtime_ns;
}

Expected<FileIdentity> file_identity(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::unexpected(path_error(errno, "cannot stat", path));
  return file_identity(st);
}

std::string_view file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

Expected<UniqueFd> open_regular_file(const std::filesystem::path& path, OpenOptions options) {
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (options.no_follow) flags |= O_NOFOLLOW;
  UniqueFd fd;
  do {
    fd.reset(::open(path.c_str(), flags));
  } while (!fd && errno == EINTR);
  if (!fd) return std::unexpected(path_error(errno, "cannot open", path, options.no_follow));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::unexpected(path_error(errno, "cannot stat", path));
  if (!S_ISREG(st.st_mode)) {
    return make_error(Code::kInvalidArgument,
                      "cannot read " + path.string() + ": it is " + std::string(file_kind(st.st_mode)) +
                          ", not a regular file");
  }
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

Expected<std::string> read_regular_file(const UniqueFd& fd, const std::filesystem::path& path, size_t max_bytes) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::unexpected(path_error(errno, "cannot stat", path));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return make_error(Code::kResourceExhausted, "cannot read " + path.string() + ": it is " + std::to_string(size) +
                                                    " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  std::string bytes;
  try {
    bytes.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    return make_error(Code::kResourceExhausted,
                      "cannot read " + path.string() + ": no memory for " + std::to_string(size) + " bytes");
  }
  PB_ASSIGN_OR_RETURN(const size_t done, read_at(fd.get(), std::as_writable_bytes(std::span(bytes)), 0,
                                                 "cannot read " + path.string()));
  if (done < bytes.size())
    return make_error(Code::kDataLoss, "cannot read " + path.string() + ": it shrank to " + std::to_string(done) +
                                           " bytes while being read (" + std::to_string(size) + " expected)");
  return bytes;
}

Expected<std::string> read_regular_file(const std::filesystem::path& path, size_t max_bytes, OpenOptions options) {
  PB_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path, options));
  return read_regular_file(fd, path, max_bytes);
}

}  // namespace plugboard
