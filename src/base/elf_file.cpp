#include "base/elf_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "base/hex.h"
#include "base/read_at.h"

namespace plugboard {
namespace {

// [offset, offset + length) as text, without wrapping: "0x40..0x1000" or "0xfff..(past 2^64)".
std::string range(uint64_t offset, uint64_t length) {
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, length, &end)) return hex_number(offset) + " + " + hex_number(length) + " (past 2^64)";
  return hex_number(offset) + ".." + hex_number(end);
}

}  // namespace

uint16_t native_elf_machine() {
#if defined(__x86_64__)
  return EM_X86_64;
#elif defined(__aarch64__)
  return EM_AARCH64;
#elif defined(__powerpc64__)
  return EM_PPC64;
#elif defined(__riscv)
  return EM_RISCV;
#elif defined(__s390x__)
  return EM_S390;
#else
  return EM_NONE;
#endif
}

Expected<ElfFile> ElfFile::open(const std::filesystem::path& path, OpenOptions options) {
  PB_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path, options));
  return from_fd(std::move(fd), path);
}

Expected<ElfFile> ElfFile::from_fd(UniqueFd fd, const std::filesystem::path& path) {
  ElfFile f;
  f.path_ = path;
  f.fd_ = std::move(fd);
  struct stat st {};
  if (::fstat(f.fd_.get(), &st) != 0)
    return make_error(Code::kUnknown, "cannot stat " + path.string() + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return invalid_argument(path.string() + " is " + std::string(file_kind(st.st_mode)) + ", not an ELF file");
  f.size_ = static_cast<uint64_t>(st.st_size);
  f.identity_ = file_identity(st);
  const std::string name = path.string();
  if (f.size_ == 0) return invalid_argument(name + " is not an ELF file (it is empty)");
  unsigned char ident[EI_NIDENT] = {};
  const uint64_t head = f.size_ < EI_NIDENT ? f.size_ : EI_NIDENT;
  PB_RETURN_IF_ERROR(f.read(0, ident, head, "the ELF identification"));
  if (head < SELFMAG || std::memcmp(ident, ELFMAG, SELFMAG) != 0)
    return invalid_argument(name + " is not an ELF file (no ELF magic at its start)");
  if (f.size_ < sizeof(Elf64_Ehdr))
    return invalid_argument(name + " is a truncated ELF file: " + std::to_string(f.size_) +
                            " bytes, shorter than its own 64-byte ELF header");
  if (ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB)
    return invalid_argument(name + " is not a 64-bit little-endian ELF file");
  PB_RETURN_IF_ERROR(f.read(0, &f.header_, sizeof(Elf64_Ehdr), "the ELF header"));
  if (f.header_.e_ehsize < sizeof(Elf64_Ehdr) && f.header_.e_ehsize != 0)
    return invalid_argument(name + ": ELF header size " + std::to_string(f.header_.e_ehsize) + " is too small");
  return f;
}

std::unexpected<Error> ElfFile::out_of_bounds(const std::string& what, uint64_t offset, uint64_t length) const {
  return make_error(Code::kOutOfRange, path_.string() + ": " + what + " (bytes " + range(offset, length) +
                                           ") lies outside the file (" + std::to_string(size_) +
                                           " bytes): the file is truncated or corrupt");
}

Status ElfFile::read(uint64_t offset, void* out, uint64_t length, const std::string& what) const {
  if (!contains(offset, length)) return out_of_bounds(what, offset, length);
  const std::span<std::byte> dst(static_cast<std::byte*>(out), static_cast<size_t>(length));
  PB_ASSIGN_OR_RETURN(const size_t n, read_at(fd_.get(), dst, offset, "cannot read " + what + " of " + path_.string()));
  if (n < dst.size()) return make_error(Code::kDataLoss, path_.string() + " shrank while " + what + " was read");
  return ok();
}

Expected<std::string> ElfFile::read_bytes(uint64_t offset, uint64_t length, uint64_t max_bytes,
                                          const std::string& what) const {
  if (!contains(offset, length)) return out_of_bounds(what, offset, length);
  if (length > max_bytes)
    return make_error(Code::kResourceExhausted, path_.string() + ": " + what + " is " + std::to_string(length) +
                                                    " bytes, more than the limit of " + std::to_string(max_bytes));
  std::string out(static_cast<size_t>(length), '\0');
  PB_RETURN_IF_ERROR(read(offset, out.data(), length, what));
  return out;
}

Expected<std::vector<Elf64_Phdr>> ElfFile::program_headers() const {
  if (header_.e_phnum == 0) return std::vector<Elf64_Phdr>{};
  if (header_.e_phentsize != sizeof(Elf64_Phdr))
    return invalid_argument(path_.string() + ": program header entry size " + std::to_string(header_.e_phentsize) +
                            ", expected " + std::to_string(sizeof(Elf64_Phdr)));
  // e_phnum == PN_XNUM means the count is in section 0's sh_info: no shared library needs that many.
  if (header_.e_phnum == PN_XNUM)
    return invalid_argument(path_.string() + ": extended program header numbering (PN_XNUM) is not supported");
  return read_array<Elf64_Phdr>(header_.e_phoff, header_.e_phnum,
                                "the program header table (" + std::to_string(header_.e_phnum) + " entries)");
}

Expected<std::vector<Elf64_Shdr>> ElfFile::section_headers() const {
  if (header_.e_shoff == 0) return std::vector<Elf64_Shdr>{};
  if (header_.e_shentsize != sizeof(Elf64_Shdr))
    return invalid_argument(path_.string() + ": section header entry size " + std::to_string(header_.e_shentsize) +
                            ", expected " + std::to_string(sizeof(Elf64_Shdr)));
  uint64_t count = header_.e_shnum;
  if (count == 0) {
    // Extended numbering: the real count is section 0's sh_size.
    Elf64_Shdr first{};
    PB_RETURN_IF_ERROR(read(header_.e_shoff, &first, sizeof(first), "section header 0"));
    count = first.sh_size;
    if (count == 0) return std::vector<Elf64_Shdr>{};
  }
  return read_array<Elf64_Shdr>(header_.e_shoff, count,
                                "the section header table (" + std::to_string(count) + " entries)");
}

std::optional<uint64_t> ElfFile::file_offset(const std::vector<Elf64_Phdr>& phdrs, uint64_t vaddr) {
  for (const auto& p : phdrs) {
    if (p.p_type != PT_LOAD || vaddr < p.p_vaddr || vaddr - p.p_vaddr >= p.p_filesz) continue;
    uint64_t off = 0;
    if (__builtin_add_overflow(p.p_offset, vaddr - p.p_vaddr, &off)) return std::nullopt;
    return off;
  }
  return std::nullopt;
}

Status ElfFile::check_loadable() const {
  const std::string name = path_.string();
  if (header_.e_type != ET_DYN)
    return invalid_argument(name + " is not an ELF shared library (e_type " + std::to_string(header_.e_type) +
                            ", expected ET_DYN)");
  if (header_.e_machine != native_elf_machine())
    return invalid_argument(name + " is an ELF shared library for another machine (e_machine " +
                            std::to_string(header_.e_machine) + ", this machine is " +
                            std::to_string(native_elf_machine()) + ")");
  if (header_.e_version != EV_CURRENT)
    return invalid_argument(name + ": unknown ELF version " + std::to_string(header_.e_version));
  PB_ASSIGN_OR_RETURN(std::vector<Elf64_Phdr> phdrs, program_headers());
  size_t loads = 0;
  for (size_t i = 0; i < phdrs.size(); ++i) {
    const Elf64_Phdr& p = phdrs[i];
    if (p.p_type != PT_LOAD && p.p_type != PT_DYNAMIC && p.p_type != PT_INTERP) continue;
    const std::string kind = p.p_type == PT_LOAD ? "PT_LOAD" : p.p_type == PT_DYNAMIC ? "PT_DYNAMIC" : "PT_INTERP";
    if (!contains(p.p_offset, p.p_filesz))
      return out_of_bounds("program header " + std::to_string(i) + " (" + kind + " segment)", p.p_offset, p.p_filesz);
    if (p.p_type == PT_LOAD) {
      ++loads;
      if (p.p_filesz > p.p_memsz)
        return invalid_argument(name + ": program header " + std::to_string(i) +
                                " (PT_LOAD segment) has a file size larger than its memory size");
    }
  }
  if (loads == 0) return invalid_argument(name + " has no PT_LOAD segment: nothing to load");
  PB_ASSIGN_OR_RETURN(std::vector<Elf64_Shdr> sections, section_headers());
  for (size_t i = 0; i < sections.size(); ++i) {
    const Elf64_Shdr& s = sections[i];
    if (s.sh_type == SHT_NOBITS || s.sh_type == SHT_NULL) continue;
    if (!contains(s.sh_offset, s.sh_size))
      return out_of_bounds("section " + std::to_string(i) + " (type " + std::to_string(s.sh_type) + ")", s.sh_offset,
                           s.sh_size);
  }
  return ok();
}

}  // namespace plugboard
