// Writing .npy files as numpy.save does, through an AtomicFile (base/atomic_file.h).
#include "io/npy.h"

#include <limits>

#include "base/atomic_file.h"
#include "io/npy_format.h"

namespace plugboard::io {
namespace {

using namespace npy_format;

void append_le(std::vector<std::byte>& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xFF));
}

}  // namespace

using namespace npy_format;

std::vector<std::byte> encode_npy(const HostArray& array) {
  std::string header = "{'descr': " + single_quoted(npy_descr(array.dtype)) +
                       ", 'fortran_order': False, 'shape': " + shape_repr(array.dims) + ", }";
  // Like numpy: room for shape[0] to grow to its widest without moving the data.
  if (!array.dims.empty()) {
    const size_t digits = std::to_string(array.dims[0]).size();
    if (digits < kGrowthAxisMaxDigits) header.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // numpy pads to the next multiple of 64, a full 64 when already aligned, and ends with '\n'.
  const auto padded_len = [&](size_t preamble) {
    const size_t unpadded = preamble + header.size() + 1;
    return header.size() + 1 + (kAlign - unpadded % kAlign);
  };
  size_t hlen = padded_len(10);
  const bool v2 = hlen > std::numeric_limits<uint16_t>::max();  // numpy switches to 2.0 only then
  if (v2) hlen = padded_len(12);
  header.append(hlen - header.size() - 1, ' ');
  header += '\n';

  std::vector<std::byte> out;
  out.reserve((v2 ? 12 : 10) + hlen + array.data.size());
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  out.push_back(std::byte{v2 ? uint8_t{2} : uint8_t{1}});
  out.push_back(std::byte{0});
  append_le(out, hlen, v2 ? 4 : 2);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), array.data.begin(), array.data.end());
  return out;
}

Status write_npy(const std::filesystem::path& path, const HostArray& array) {
  if (npy_descr(array.dtype).empty())
    return invalid_argument("cannot write " + path.string() + ": dtype " + dtype_name(array.dtype) +
                            " has no .npy descr");
  const auto needed = array.checked_byte_size();
  if (!needed)
    return invalid_argument("cannot write " + path.string() + ": invalid shape " + shape_repr(array.dims) + " (" +
                            needed.error().message() + ")");
  if (array.data.size() != *needed)
    return invalid_argument("cannot write " + path.string() + ": " + shape_string(array.dtype, array.dims) +
                            " needs " + std::to_string(*needed) + " bytes, the array holds " +
                            std::to_string(array.data.size()));

  // Through a temporary file beside it, synced and renamed into place: a failure leaves no partial file.
  return annotate(write_file_atomically(path, encode_npy(array), 0644), "writing " + path.string());
}

}  // namespace plugboard::io
