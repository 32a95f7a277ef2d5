// Reading and writing NumPy .npy files (the subset in conformance/README.md, ".npy subset").
//
// bf16 and f8 arrays are stored as their raw bits in '<u2' / '|u1' arrays, so the descr alone cannot
// tell them from u16 / u8: the caller passes the dtype it expects (from case.json) and that wins.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "io/host_array.h"

namespace plugboard::io {

// The descr numpy writes for a dtype: "<f4", "|b1", "<u2" for bf16, "|u1" for the f8 types, "<c8".
// Empty for kInvalid or an unknown value.
std::string npy_descr(DType t);

// Parses a whole .npy file held in memory. Versions 1.0, 2.0 and 3.0 headers are accepted; the data must
// be little-endian, C order, and exactly fill the rest of the file. `source_name` (a path, usually)
// starts every error message. `expected`, when given, must agree with the descr, except that bf16
// accepts '<u2' and f8e5m2/f8e4m3fn accept '|u1' (and then become the dtype of the result).
// Errors: INVALID_ARGUMENT for a malformed or unsupported file, DATA_LOSS for truncated data.
Expected<HostArray> parse_npy(std::span<const std::byte> bytes, std::string_view source_name,
                              std::optional<DType> expected = std::nullopt);

// Reads and parses a file. A file that cannot be opened or read gives NOT_FOUND, PERMISSION_DENIED, ...
// (from errno) with the path in the message. Only a regular file is read (a FIFO, a device such as
// /dev/zero or a directory is INVALID_ARGUMENT, without reading or blocking), and never more than its
// header declares: the header is read first and the file's size checked against it (DATA_LOSS for less
// data, INVALID_ARGUMENT for trailing bytes) before exactly the declared data is read; data larger than
// kMaxArrayBytes (base/regular_file.h) is RESOURCE_EXHAUSTED; a header over 1 MiB is INVALID_ARGUMENT.
Expected<HostArray> read_npy(const std::filesystem::path& path, std::optional<DType> expected = std::nullopt) noexcept;

// The file numpy.save would write for this array: version 1.0 (2.0 only for a header past 65535 bytes),
// header "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" padded with spaces and a '\n'
// so the data starts at a multiple of 64. Writes data as it is: the caller keeps data.size() right.
std::vector<std::byte> encode_npy(const HostArray& array);

// Writes encode_npy(array) to a temporary file in the same folder and renames it over `path`, so a
// failure leaves no partial file behind. INVALID_ARGUMENT when data.size() disagrees with dtype/dims.
Status write_npy(const std::filesystem::path& path, const HostArray& array);

}  // namespace plugboard::io
