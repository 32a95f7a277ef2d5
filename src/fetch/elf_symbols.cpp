// Reads the section headers, then only .dynsym and its string table (a plugin is hundreds of MB).
#include "fetch/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace plugboard::fetch {
namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `size` bytes at `offset`; false at end of file or on error (errno set for errors).
bool read_at(int fd, void* out, size_t size, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace

Expected<bool> exports_dynamic_symbol(const std::filesystem::path& path, std::string_view symbol) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return make_error(Code::kNotFound, "cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return make_error(Code::kInternal, "cannot stat " + path.string());
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);

  Elf64_Ehdr eh{};
  if (!read_at(f.fd, &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return false;
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > file_size)
    return false;
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!read_at(f.fd, sections.data(), sections.size() * sizeof(Elf64_Shdr), eh.e_shoff))
    return make_error(Code::kDataLoss, "cannot read the section headers of " + path.string());

  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    if (sh.sh_offset + sh.sh_size > file_size || strtab.sh_offset + strtab.sh_size > file_size)
      return make_error(Code::kDataLoss, path.string() + ": .dynsym or its string table lies past the end of the file");
    std::vector<Elf64_Sym> symbols(sh.sh_size / sizeof(Elf64_Sym));
    std::string names(strtab.sh_size, '\0');
    if (!read_at(f.fd, symbols.data(), symbols.size() * sizeof(Elf64_Sym), sh.sh_offset) ||
        !read_at(f.fd, names.data(), names.size(), strtab.sh_offset))
      return make_error(Code::kDataLoss, "cannot read the dynamic symbols of " + path.string());
    for (const Elf64_Sym& s : symbols) {
      if (s.st_shndx == SHN_UNDEF || s.st_name >= names.size()) continue;
      const int bind = ELF64_ST_BIND(s.st_info);
      if (bind != STB_GLOBAL && bind != STB_WEAK) continue;
      if (std::string_view(names.c_str() + s.st_name) == symbol) return true;
    }
  }
  return false;
}

}  // namespace plugboard::fetch
