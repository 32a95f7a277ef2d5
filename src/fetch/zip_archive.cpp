// ZipArchive: the records of APPNOTE 4.3 (end of central directory, zip64 locator and record, central
// and local file headers, the zip64 extended information extra field), little-endian, read at checked
// offsets; data inflated by zlib (raw deflate) and checked with zlib's crc32.
#include "fetch/zip_archive.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <optional>
#include <unordered_set>

#include "base/errno_error.h"
#include "base/hex.h"
#include "base/read_at.h"

namespace plugboard::fetch {
namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64EndOfCentralDirectory = 0x06064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr size_t kEndRecordBytes = 22;       // without its comment
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kZip64EndRecordBytes = 56;  // without its extensible data
constexpr size_t kCentralHeaderBytes = 46;
constexpr size_t kLocalHeaderBytes = 30;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kFlagEncrypted = 0x0001;
constexpr uint16_t kFlagDataDescriptor = 0x0008;
constexpr uint16_t kFlagStrongEncryption = 0x0040;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflated = 8;
constexpr uint32_t kMax32 = 0xffffffff;
constexpr uint16_t kMax16 = 0xffff;
constexpr size_t kChunkBytes = size_t{1} << 20;

// Little-endian fields of a record already read whole (callers check the record's length first).
uint16_t u16(std::span<const std::byte> b, size_t at) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(b[at]) | (std::to_integer<uint16_t>(b[at + 1]) << 8));
}
uint32_t u32(std::span<const std::byte> b, size_t at) { return u16(b, at) | (uint32_t{u16(b, at + 2)} << 16); }
uint64_t u64(std::span<const std::byte> b, size_t at) { return u32(b, at) | (uint64_t{u32(b, at + 4)} << 32); }

// The smaller of two sizes, as a size_t (the first is a size_t already).
size_t at_most(size_t a, uint64_t b) { return static_cast<size_t>(std::min<uint64_t>(a, b)); }

std::unexpected<Error> bad_archive(const std::string& name, const std::string& problem) {
  return make_error(Code::kDataLoss, name + ": " + problem + ": not a well-formed zip archive");
}

// Exactly `size` bytes at `offset`, or DATA_LOSS saying the archive ends first.
Expected<std::vector<std::byte>> read_exactly(int fd, uint64_t offset, size_t size, const std::string& name,
                                              const std::string& what) {
  std::vector<std::byte> out(size);
  PB_ASSIGN_OR_RETURN(const size_t n, read_at(fd, out, offset, "cannot read " + name));
  if (n != size)
    return make_error(Code::kDataLoss, name + ": the file ends inside " + what + " (at byte " +
                                           std::to_string(offset + n) + "): the archive is truncated");
  return out;
}

// The zip64 extended information of a central header: the fields whose 32-bit (or 16-bit) value is
// the maximum are there, in this order, 8 bytes each (the disk number 4).
struct Zip64Fields {
  bool size = false, compressed_size = false, offset = false, disk = false;
};
Status apply_zip64_extra(std::span<const std::byte> extra, const Zip64Fields& wanted, ZipEntry& entry, uint32_t& disk,
                         const std::string& what) {
  size_t at = 0;
  while (at + 4 <= extra.size()) {
    const uint16_t id = u16(extra, at), length = u16(extra, at + 2);
    if (at + 4 + length > extra.size()) return make_error(Code::kDataLoss, what + ": an extra field runs past its header");
    if (id == kZip64ExtraId) {
      const auto field = extra.subspan(at + 4, length);
      size_t pos = 0;
      auto take = [&](uint64_t& value, size_t bytes) -> bool {
        if (pos + bytes > field.size()) return false;
        value = bytes == 8 ? u64(field, pos) : u32(field, pos);
        pos += bytes;
        return true;
      };
      uint64_t disk64 = disk;
      if ((wanted.size && !take(entry.size, 8)) || (wanted.compressed_size && !take(entry.compressed_size, 8)) ||
          (wanted.offset && !take(entry.local_header_offset, 8)) || (wanted.disk && !take(disk64, 4)))
        return make_error(Code::kDataLoss, what + ": its zip64 extra field is too short for the values it stands for");
      disk = static_cast<uint32_t>(disk64);
      return ok();
    }
    at += 4 + length;
  }
  return make_error(Code::kDataLoss, what + ": a size or offset says zip64 but the entry has no zip64 extra field");
}

// The zlib stream of one inflation, ended however the reading ends.
class Inflater {
 public:
  Inflater() = default;
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  ~Inflater() {
    if (started_) inflateEnd(&stream_);
  }
  bool start() {
    started_ = inflateInit2(&stream_, -MAX_WBITS) == Z_OK;
    return started_;
  }
  z_stream& stream() { return stream_; }

 private:
  z_stream stream_{};
  bool started_ = false;
};

}  // namespace

Expected<ZipArchive> ZipArchive::open(UniqueFd fd, std::string name) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "cannot stat " + name);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kEndRecordBytes) return bad_archive(name, "only " + std::to_string(file_size) + " bytes");

  // The end record is the last thing in the file: 22 bytes and a comment of up to 65535. The one that
  // ends exactly at the end of the file is taken (a signature inside the comment does not).
  const size_t tail_size = at_most(kEndRecordBytes + kMax16, file_size);
  const uint64_t tail_offset = file_size - tail_size;
  PB_ASSIGN_OR_RETURN(const std::vector<std::byte> tail, read_exactly(fd.get(), tail_offset, tail_size, name, "its end"));
  std::optional<size_t> end_at;
  for (size_t at = tail_size - kEndRecordBytes + 1; at-- > 0;)
    if (u32(tail, at) == kEndOfCentralDirectory && at + kEndRecordBytes + u16(tail, at + 20) == tail_size) {
      end_at = at;
      break;
    }
  if (!end_at) return bad_archive(name, "no end-of-central-directory record at its end");
  const auto end = std::span(tail).subspan(*end_at, kEndRecordBytes);
  const uint64_t end_offset = tail_offset + *end_at;
  uint32_t disk = u16(end, 4), directory_disk = u16(end, 6);
  uint64_t entries_on_disk = u16(end, 8), entry_count = u16(end, 10);
  uint64_t directory_size = u32(end, 12), directory_offset = u32(end, 16);
  uint64_t directory_end_limit = end_offset;  // the central directory ends before this

  // A zip64 locator right before the end record points at the zip64 end record, whose values replace
  // the 16- and 32-bit ones (each of which is then its maximum or the same value).
  if (end_offset >= kZip64LocatorBytes) {
    PB_ASSIGN_OR_RETURN(const std::vector<std::byte> locator,
                        read_exactly(fd.get(), end_offset - kZip64LocatorBytes, kZip64LocatorBytes, name, "its zip64 locator"));
    if (u32(locator, 0) == kZip64EndLocator) {
      const uint64_t record_offset = u64(locator, 8);
      if (u32(locator, 4) != 0 || u32(locator, 16) != 1)
        return bad_archive(name, "its zip64 locator says the archive spans several disks");
      if (record_offset > end_offset - kZip64LocatorBytes ||
          end_offset - kZip64LocatorBytes - record_offset < kZip64EndRecordBytes)
        return bad_archive(name, "its zip64 locator points at offset " + std::to_string(record_offset) +
                                     ", where no zip64 end record fits");
      PB_ASSIGN_OR_RETURN(const std::vector<std::byte> record,
                          read_exactly(fd.get(), record_offset, kZip64EndRecordBytes, name, "its zip64 end record"));
      if (u32(record, 0) != kZip64EndOfCentralDirectory)
        return bad_archive(name, "no zip64 end record where its locator points (offset " + std::to_string(record_offset) + ")");
      const uint32_t disk64 = u32(record, 16), directory_disk64 = u32(record, 20);
      const uint64_t on_disk64 = u64(record, 24), count64 = u64(record, 32);
      const uint64_t size64 = u64(record, 40), offset64 = u64(record, 48);
      auto agrees = [](uint64_t short_value, uint64_t max, uint64_t long_value) {
        return short_value == max || short_value == long_value;
      };
      if (!agrees(disk, kMax16, disk64) || !agrees(directory_disk, kMax16, directory_disk64) ||
          !agrees(entries_on_disk, kMax16, on_disk64) || !agrees(entry_count, kMax16, count64) ||
          !agrees(directory_size, kMax32, size64) || !agrees(directory_offset, kMax32, offset64))
        return bad_archive(name, "its end record and its zip64 end record disagree");
      disk = disk64, directory_disk = directory_disk64, entries_on_disk = on_disk64, entry_count = count64;
      directory_size = size64, directory_offset = offset64;
      directory_end_limit = record_offset;
    }
  }
  if (disk != 0 || directory_disk != 0 || entries_on_disk != entry_count)
    return bad_archive(name, "it spans several disks (unsupported)");
  if (directory_offset > directory_end_limit || directory_end_limit - directory_offset < directory_size)
    return bad_archive(name, "its central directory (" + std::to_string(directory_size) + " bytes at offset " +
                                 std::to_string(directory_offset) + ") runs past its end record (offset " +
                                 std::to_string(directory_end_limit) + ")");
  if (directory_size > kMaxCentralDirectoryBytes)
    return make_error(Code::kResourceExhausted, name + ": its central directory is " + std::to_string(directory_size) +
                                                    " bytes, more than the limit of " +
                                                    std::to_string(kMaxCentralDirectoryBytes));
  if (entry_count > directory_size / kCentralHeaderBytes)
    return bad_archive(name, "it declares " + std::to_string(entry_count) + " entries in a central directory of " +
                                 std::to_string(directory_size) + " bytes");

  PB_ASSIGN_OR_RETURN(const std::vector<std::byte> directory,
                      read_exactly(fd.get(), directory_offset, static_cast<size_t>(directory_size), name,
                                   "its central directory"));
  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<size_t>(entry_count));
  std::unordered_set<std::string> names;
  size_t at = 0;
  for (uint64_t i = 0; i < entry_count; ++i) {
    const std::string what = name + ": central directory entry " + std::to_string(i);
    if (directory.size() - at < kCentralHeaderBytes || u32(directory, at) != kCentralHeader)
      return bad_archive(name, "central directory entry " + std::to_string(i) + " is missing or has no signature");
    const auto header = std::span(directory).subspan(at, kCentralHeaderBytes);
    const size_t name_length = u16(header, 28), extra_length = u16(header, 30), comment_length = u16(header, 32);
    if (directory.size() - at - kCentralHeaderBytes < name_length + extra_length + comment_length)
      return bad_archive(name, "central directory entry " + std::to_string(i) + " runs past the central directory");
    ZipEntry e;
    e.made_by_os = static_cast<uint8_t>(u16(header, 4) >> 8);
    e.flags = u16(header, 8);
    e.method = u16(header, 10);
    e.crc32 = u32(header, 16);
    e.compressed_size = u32(header, 20);
    e.size = u32(header, 24);
    uint32_t start_disk = u16(header, 34);
    e.external_attributes = u32(header, 38);
    e.local_header_offset = u32(header, 42);
    const auto* name_bytes = reinterpret_cast<const char*>(directory.data() + at + kCentralHeaderBytes);
    e.name.assign(name_bytes, name_length);
    const auto extra = std::span(directory).subspan(at + kCentralHeaderBytes + name_length, extra_length);
    const Zip64Fields zip64{e.size == kMax32, e.compressed_size == kMax32, e.local_header_offset == kMax32,
                            start_disk == kMax16};
    if (zip64.size || zip64.compressed_size || zip64.offset || zip64.disk)
      PB_RETURN_IF_ERROR(apply_zip64_extra(extra, zip64, e, start_disk, what + " (" + e.name + ")"));
    if (e.name.empty() || e.name.find('\0') != std::string::npos)
      return bad_archive(name, "central directory entry " + std::to_string(i) + " has an empty name or one with a NUL byte");
    if (start_disk != 0) return bad_archive(name, "entry " + e.name + " starts on another disk (unsupported)");
    if (e.local_header_offset >= directory_offset || directory_offset - e.local_header_offset < kLocalHeaderBytes)
      return bad_archive(name, "entry " + e.name + "'s local header offset " + std::to_string(e.local_header_offset) +
                                   " is not before the central directory (offset " + std::to_string(directory_offset) + ")");
    if (!names.insert(e.name).second) return bad_archive(name, "two entries are named " + e.name);
    entries.push_back(std::move(e));
    at += kCentralHeaderBytes + name_length + extra_length + comment_length;
  }
  if (at != directory.size())
    return bad_archive(name, "its central directory holds " + std::to_string(directory.size() - at) +
                                 " bytes past its " + std::to_string(entry_count) + " entries");
  return ZipArchive(std::move(fd), std::move(name), directory_offset, std::move(entries));
}

std::unexpected<Error> ZipArchive::corrupt(const ZipEntry& entry, const std::string& problem) const {
  return make_error(Code::kDataLoss, name_ + ": member " + entry.name + ": " + problem);
}

Status ZipArchive::read(const ZipEntry& entry, const Sink& sink) const {
  if (entry.flags & (kFlagEncrypted | kFlagStrongEncryption)) return corrupt(entry, "it is encrypted (unsupported)");
  if (entry.method != kMethodStored && entry.method != kMethodDeflated)
    return corrupt(entry, "compression method " + std::to_string(entry.method) +
                              " is not supported (only 0, stored, and 8, deflated)");
  // Its local header: the same entry as the central directory says, and where its data starts.
  PB_ASSIGN_OR_RETURN(const std::vector<std::byte> local,
                      read_exactly(fd_.get(), entry.local_header_offset, kLocalHeaderBytes, name_,
                                   "the local header of " + entry.name));
  if (u32(local, 0) != kLocalHeader)
    return corrupt(entry, "no local header at offset " + std::to_string(entry.local_header_offset));
  const uint16_t local_flags = u16(local, 6), local_method = u16(local, 8);
  const uint32_t local_crc = u32(local, 14), local_compressed = u32(local, 18), local_size = u32(local, 22);
  const uint64_t name_length = u16(local, 26), extra_length = u16(local, 28);
  if (local_method != entry.method || (local_flags & kFlagEncrypted) != (entry.flags & kFlagEncrypted))
    return corrupt(entry, "its local header disagrees with the central directory (method, flags)");
  // Without a data descriptor the local header carries the CRC and sizes too (a size of 0xffffffff
  // stands for the zip64 one).
  if (!(local_flags & kFlagDataDescriptor) &&
      (local_crc != entry.crc32 || (local_compressed != kMax32 && local_compressed != entry.compressed_size) ||
       (local_size != kMax32 && local_size != entry.size)))
    return corrupt(entry, "its local header disagrees with the central directory (CRC-32 or sizes)");
  const uint64_t data_offset = entry.local_header_offset + kLocalHeaderBytes + name_length + extra_length;
  if (data_offset > central_directory_offset_ || central_directory_offset_ - data_offset < entry.compressed_size)
    return corrupt(entry, "its " + std::to_string(entry.compressed_size) + " bytes of data at offset " +
                              std::to_string(data_offset) + " run past the start of the central directory (offset " +
                              std::to_string(central_directory_offset_) + ")");
  PB_ASSIGN_OR_RETURN(const std::vector<std::byte> local_name,
                      read_exactly(fd_.get(), entry.local_header_offset + kLocalHeaderBytes, name_length, name_,
                                   "the local header of " + entry.name));
  if (std::string_view(reinterpret_cast<const char*>(local_name.data()), local_name.size()) != entry.name)
    return corrupt(entry, "its local header names another file");
  return entry.method == kMethodStored ? read_stored(entry, data_offset, sink) : read_deflated(entry, data_offset, sink);
}

Status ZipArchive::read_stored(const ZipEntry& entry, uint64_t data_offset, const Sink& sink) const {
  if (entry.compressed_size != entry.size)
    return corrupt(entry, "stored, but its entry declares " + std::to_string(entry.size) + " bytes and holds " +
                              std::to_string(entry.compressed_size));
  std::vector<std::byte> block(at_most(kChunkBytes, entry.size));
  uLong crc = crc32_z(0, nullptr, 0);
  for (uint64_t done = 0; done < entry.size;) {
    const size_t want = at_most(block.size(), entry.size - done);
    PB_ASSIGN_OR_RETURN(const size_t n, read_at(fd_.get(), std::span(block).first(want), data_offset + done,
                                                "cannot read " + entry.name + " of " + name_));
    if (n != want) return corrupt(entry, "the file ends inside its data: the archive is truncated");
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(block.data()), n);
    PB_RETURN_IF_ERROR(sink(std::span<const std::byte>(block.data(), n)));
    done += n;
  }
  if (crc != entry.crc32)
    return corrupt(entry, "its CRC-32 is " + hex_number(crc) + ", its entry says " + hex_number(entry.crc32) +
                              ": the data is corrupt");
  return ok();
}

Status ZipArchive::read_deflated(const ZipEntry& entry, uint64_t data_offset, const Sink& sink) const {
  Inflater inflater;
  if (!inflater.start())
    return make_error(Code::kResourceExhausted, name_ + ": member " + entry.name + ": zlib could not start inflating it");
  z_stream& z = inflater.stream();
  std::vector<std::byte> in(at_most(kChunkBytes, std::max<uint64_t>(entry.compressed_size, 1)));
  std::vector<std::byte> out(kChunkBytes);
  uint64_t read_so_far = 0, done = 0;
  uLong crc = crc32_z(0, nullptr, 0);
  for (;;) {
    if (z.avail_in == 0 && read_so_far < entry.compressed_size) {
      const size_t want = at_most(in.size(), entry.compressed_size - read_so_far);
      PB_ASSIGN_OR_RETURN(const size_t n, read_at(fd_.get(), std::span(in).first(want), data_offset + read_so_far,
                                                  "cannot read " + entry.name + " of " + name_));
      if (n != want) return corrupt(entry, "the file ends inside its data: the archive is truncated");
      z.next_in = reinterpret_cast<Bytef*>(in.data());
      z.avail_in = static_cast<uInt>(n);
      read_so_far += n;
    }
    // Room for one byte past what the entry declares, at most: that byte is the proof of a lie.
    const uint64_t left = entry.size - done;
    const size_t room = left < out.size() ? static_cast<size_t>(left) + 1 : out.size();
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = room - z.avail_out;
    if (produced > entry.size - done)
      return corrupt(entry, "it inflates past the " + std::to_string(entry.size) + " bytes its entry declares: refused");
    if (produced > 0) {
      crc = crc32_z(crc, reinterpret_cast<const Bytef*>(out.data()), produced);
      PB_RETURN_IF_ERROR(sink(std::span<const std::byte>(out.data(), produced)));
      done += produced;
    }
    if (rc == Z_STREAM_END) break;
    if (rc == Z_DATA_ERROR) return corrupt(entry, std::string("invalid deflate data (") + (z.msg ? z.msg : "zlib") + ")");
    if (rc == Z_MEM_ERROR)
      return make_error(Code::kResourceExhausted, name_ + ": member " + entry.name + ": zlib ran out of memory inflating it");
    const bool input_left = z.avail_in > 0 || read_so_far < entry.compressed_size;
    if (!input_left && produced == 0)
      return corrupt(entry, "its deflate data ends before the deflate stream does: truncated");
    if (rc != Z_OK && rc != Z_BUF_ERROR) return corrupt(entry, "zlib's inflate failed with code " + std::to_string(rc));
  }
  if (z.avail_in > 0 || read_so_far < entry.compressed_size)
    return corrupt(entry, "its deflate stream ends before its " + std::to_string(entry.compressed_size) +
                              " compressed bytes do");
  if (done != entry.size)
    return corrupt(entry, "it gave " + std::to_string(done) + " bytes, its entry says " + std::to_string(entry.size));
  if (crc != entry.crc32)
    return corrupt(entry, "its CRC-32 is " + hex_number(crc) + ", its entry says " + hex_number(entry.crc32) +
                              ": the data is corrupt");
  return ok();
}

}  // namespace plugboard::fetch
