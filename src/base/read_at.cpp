#include "base/read_at.h"

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>

#include "base/errno_error.h"

namespace plugboard {

Expected<size_t> read_at(int fd, std::span<std::byte> dst, uint64_t offset, std::string_view what) {
  size_t done = 0;
  while (done < dst.size()) {
    const ssize_t n = ::pread(fd, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, what);
    if (n == 0) break;  // the end of the file
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace plugboard
