// A zip archive (PKWARE's APPNOTE) read with pread from one descriptor: the central directory, found
// from the end-of-central-directory record (and the zip64 locator and record when present), and one
// entry at a time streamed out, stored (method 0) or deflated (method 8, raw deflate through zlib), its
// CRC-32 checked at the end. Enough for wheels; nothing else of the format (no multi-disk archives, no
// encryption, no other methods).
//
// An archive is untrusted input. Every offset and size is checked against the file and against each
// other before it is used (the central directory lies before its end record, an entry's data before
// the central directory), and an entry's local header must agree with its central one. An entry is
// never delivered past the size it declares: inflation stops at the first byte beyond it. Every error
// is DATA_LOSS (RESOURCE_EXHAUSTED for a central directory past kMaxCentralDirectoryBytes) and names
// the archive and, where there is one, the entry.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace plugboard::fetch {

inline constexpr uint64_t kMaxCentralDirectoryBytes = uint64_t{256} << 20;

struct ZipEntry {
  std::string name;
  uint64_t size = 0;             // uncompressed
  uint64_t compressed_size = 0;  // the bytes of its data in the archive
  uint64_t local_header_offset = 0;
  uint32_t crc32 = 0;
  uint16_t method = 0;  // 0 stored, 8 deflated; others are refused when read
  uint16_t flags = 0;   // general purpose bits (bit 0: encrypted)
  uint8_t made_by_os = 0;  // the high byte of "version made by": 3 is Unix
  uint32_t external_attributes = 0;  // on Unix, st_mode in the high 16 bits
};

class ZipArchive {
 public:
  static constexpr uint8_t kMadeByUnix = 3;

  // Reads the central directory of the archive `fd` holds (which the archive then owns). `name` is
  // how errors name the archive ("wheel /x/y.whl").
  static Expected<ZipArchive> open(UniqueFd fd, std::string name);

  const std::string& name() const { return name_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }

  // `entry`'s bytes, chunk by chunk, to `sink`: exactly entry.size bytes, or an error (and then no
  // more than entry.size were delivered). The sink's error is returned as it is.
  using Sink = std::function<Status(std::span<const std::byte>)>;
  Status read(const ZipEntry& entry, const Sink& sink) const;

 private:
  ZipArchive(UniqueFd fd, std::string name, uint64_t central_directory_offset, std::vector<ZipEntry> entries)
      : fd_(std::move(fd)),
        name_(std::move(name)),
        central_directory_offset_(central_directory_offset),
        entries_(std::move(entries)) {}

  Status read_stored(const ZipEntry& entry, uint64_t data_offset, const Sink& sink) const;
  Status read_deflated(const ZipEntry& entry, uint64_t data_offset, const Sink& sink) const;
  std::unexpected<Error> corrupt(const ZipEntry& entry, const std::string& problem) const;

  UniqueFd fd_;
  std::string name_;
  uint64_t central_directory_offset_ = 0;  // where entries' data must end
  std::vector<ZipEntry> entries_;
};

}  // namespace plugboard::fetch
