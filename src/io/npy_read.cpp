// Reading .npy files: from memory (parse_npy) or from a regular file through its descriptor, header
// first and then exactly the data it declares (read_npy).
#include "io/npy.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <new>

#include "base/errno_error.h"
#include "base/no_throw.h"
#include "base/read_at.h"
#include "base/regular_file.h"
#include "base/unique_fd.h"
#include "io/npy_format.h"

namespace plugboard::io {
namespace {

using namespace npy_format;

// Reads exactly dst.size() bytes at `offset`; DATA_LOSS when the file ends first (it shrank).
Status pread_exact(const UniqueFd& fd, std::span<std::byte> dst, uint64_t offset, const std::filesystem::path& path) {
  PB_ASSIGN_OR_RETURN(const size_t done, read_at(fd.get(), dst, offset, "cannot read " + path.string()));
  if (done < dst.size())
    return make_error(Code::kDataLoss, "cannot read " + path.string() + ": it ended at byte " +
                                           std::to_string(offset + done) + " while being read");
  return ok();
}

}  // namespace

using namespace npy_format;

Expected<HostArray> parse_npy(std::span<const std::byte> bytes, std::string_view source,
                              std::optional<DType> expected) {
  PB_ASSIGN_OR_RETURN(auto preamble, parse_preamble(bytes.first(std::min<size_t>(bytes.size(), 12)), bytes.size(), source));
  const auto [offset, hlen] = preamble;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + offset), hlen);
  PB_ASSIGN_OR_RETURN(Layout layout, parse_layout(text, offset + hlen, bytes.size(), source, expected));
  HostArray array;
  array.dtype = layout.dtype;
  array.dims = std::move(layout.dims);
  const auto data = bytes.subspan(layout.data_offset);
  array.data.assign(data.begin(), data.end());
  return array;
}

Expected<HostArray> read_npy(const std::filesystem::path& path, std::optional<DType> expected) noexcept {
  return no_throw("reading an .npy file", [&]() -> Expected<HostArray> {
    // A regular file only (a FIFO, /dev/zero or a directory is refused without reading), and never more
    // than its header declares: the header is read first, the file's size checked against it, and then
    // exactly the declared data is read.
    PB_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "cannot stat " + path.string());
    const auto file_size = static_cast<uint64_t>(st.st_size);
    const std::string source = path.string();

    std::array<std::byte, 12> first{};
    const size_t first_size = static_cast<size_t>(std::min<uint64_t>(file_size, first.size()));
    PB_RETURN_IF_ERROR(pread_exact(fd, std::span(first).first(first_size), 0, path));
    PB_ASSIGN_OR_RETURN(auto preamble, parse_preamble(std::span(first).first(first_size), file_size, source));
    const auto [offset, hlen] = preamble;
    std::string text(hlen, '\0');
    PB_RETURN_IF_ERROR(pread_exact(fd, std::as_writable_bytes(std::span(text)), offset, path));
    PB_ASSIGN_OR_RETURN(Layout layout, parse_layout(text, offset + hlen, file_size, source, expected));
    if (layout.data_bytes > kMaxArrayBytes)
      return npy_error(source, Code::kResourceExhausted,
                       shape_string(layout.dtype, layout.dims) + " is " + std::to_string(layout.data_bytes) +
                           " bytes, more than the limit of " + std::to_string(kMaxArrayBytes));

    HostArray array;
    array.dtype = layout.dtype;
    array.dims = std::move(layout.dims);
    try {
      array.data.resize(layout.data_bytes);
    } catch (const std::bad_alloc&) {
      return npy_error(source, Code::kResourceExhausted,
                       "no memory for the " + std::to_string(layout.data_bytes) + " bytes of data");
    }
    PB_RETURN_IF_ERROR(pread_exact(fd, array.data, layout.data_offset, path));
    return array;
  });
}

}  // namespace plugboard::io
