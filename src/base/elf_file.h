// THE one ELF reader: a 64-bit little-endian ELF file read through a descriptor, every offset and
// count taken from the file checked against the file's size (with overflow-checked arithmetic) before
// anything is read or allocated. Errors are values naming the file and what lies out of bounds (only allocation can throw, and
// nothing is allocated from a size the file gives before it is checked against the file).
//
// Used before dlopen (a truncated or corrupt shared library makes the loader fault with SIGBUS while it
// maps segments that lie past the end of the file), for the dependency stage (DT_NEEDED, RPATH,
// RUNPATH) and to recognize a plugin in an unknown wheel (.dynsym defines GetPjrtApi).
#pragma once

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/regular_file.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace plugboard {

// The e_machine of the machine plugboard was built for (EM_X86_64, EM_AARCH64, ...).
uint16_t native_elf_machine();

class ElfFile {
 public:
  // Opens `path` (a regular file: a FIFO, device or directory is refused without blocking) and reads
  // its ELF header. INVALID_ARGUMENT when it is not a 64-bit little-endian ELF file.
  static Expected<ElfFile> open(const std::filesystem::path& path, OpenOptions options = {});
  // The same from a descriptor already opened by open_regular_file (the descriptor is kept).
  static Expected<ElfFile> from_fd(UniqueFd fd, const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  uint64_t size() const { return size_; }
  const Elf64_Ehdr& header() const { return header_; }
  const FileIdentity& identity() const { return identity_; }
  int fd() const { return fd_.get(); }

  // True when [offset, offset + length) lies inside the file (no wrap-around).
  bool contains(uint64_t offset, uint64_t length) const { return offset <= size_ && length <= size_ - offset; }

  // Reads exactly `length` bytes at `offset`; OUT_OF_RANGE (naming `what`) when they lie outside.
  Status read(uint64_t offset, void* out, uint64_t length, const std::string& what) const;
  // `length` bytes at `offset` as a string, checked against the file size and against `max_bytes`
  // before anything is allocated.
  Expected<std::string> read_bytes(uint64_t offset, uint64_t length, uint64_t max_bytes, const std::string& what) const;

  // The program headers (e_phentsize must be sizeof(Elf64_Phdr)), checked to lie inside the file.
  Expected<std::vector<Elf64_Phdr>> program_headers() const;
  // The section headers (extended numbering through section 0 included); empty when there are none.
  Expected<std::vector<Elf64_Shdr>> section_headers() const;
  // `count` entries of type T at `offset` (count * sizeof(T) checked against the file first).
  template <class T>
  Expected<std::vector<T>> read_array(uint64_t offset, uint64_t count, const std::string& what) const {
    if (count > (size_ / sizeof(T)) || !contains(offset, count * sizeof(T))) return out_of_bounds(what, offset, count * sizeof(T));
    std::vector<T> out(static_cast<size_t>(count));
    PB_RETURN_IF_ERROR(read(offset, out.data(), count * sizeof(T), what));
    return out;
  }

  // What dlopen needs to map the file without touching bytes past its end: an ET_DYN object for this
  // machine whose program headers, PT_LOAD segments (file ranges), section header table and sections
  // (all but SHT_NOBITS) lie inside the file. The message names the file and what is out of bounds.
  Status check_loadable() const;

  // The file offset of virtual address `vaddr` through the PT_LOAD segments; nullopt when none maps it.
  static std::optional<uint64_t> file_offset(const std::vector<Elf64_Phdr>& phdrs, uint64_t vaddr);

 private:
  ElfFile() = default;
  std::unexpected<Error> out_of_bounds(const std::string& what, uint64_t offset, uint64_t length) const;

  UniqueFd fd_;
  std::filesystem::path path_;
  uint64_t size_ = 0;
  FileIdentity identity_;
  Elf64_Ehdr header_{};
};

}  // namespace plugboard
