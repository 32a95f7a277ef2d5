// The .npy format as both reading and writing see it: the magic and alignment, the preamble and the
// header's dict (parsed from text, checked against the file's size), the descr of each dtype. Internal
// to src/io (npy_header.cpp implements it; npy_read.cpp and npy_write.cpp use it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace plugboard::io::npy_format {

inline constexpr std::array<char, 6> kMagic = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
inline constexpr size_t kAlign = 64;               // numpy aligns the data start to this
inline constexpr size_t kGrowthAxisMaxDigits = 21;  // numpy pads the header so shape[0] can grow in place
// A header longer than this is refused before it is read (numpy itself refuses 10000 by default).
inline constexpr size_t kMaxHeaderBytes = size_t{1} << 20;

// "<source>: <what>" with `code`.
std::unexpected<Error> npy_error(std::string_view source, Code code, std::string what);
std::string single_quoted(std::string_view s);
// Python's repr of a tuple of ints: "()", "(5,)", "(2, 3)".
std::string shape_repr(const std::vector<int64_t>& dims);

// Where the header ends and what it declares, read from the first bytes of a file of `file_size` bytes.
struct Layout {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> dims;
  size_t data_offset = 0;  // preamble + header
  size_t data_bytes = 0;   // what dtype and dims call for: the file must hold exactly this many after the header
};

// The magic, the version and the header length, from the file's first min(12, file_size) bytes.
// Returns the preamble's size and the header's length.
Expected<std::pair<size_t, size_t>> parse_preamble(std::span<const std::byte> first, uint64_t file_size,
                                                   std::string_view source);

// The header's dict, checked against the file's size: the data after it must be exactly what the header
// declares (DATA_LOSS for less, INVALID_ARGUMENT for trailing bytes).
Expected<Layout> parse_layout(std::string_view header_text, size_t data_offset, uint64_t file_size,
                              std::string_view source, std::optional<DType> expected);

}  // namespace plugboard::io::npy_format
