// Reads the section headers, then only .dynsym and its string table (a plugin is hundreds of MB),
// through the one bounds-checked ELF reader (base/elf_file.h).
#include "fetch/elf_symbols.h"

#include <elf.h>

#include <string>
#include <vector>

#include "base/elf_file.h"

namespace plugboard::fetch {

namespace {

// Once the file is open, a malformed ELF file (not ELF, another class, tables outside the file) defines
// no symbol; read errors stay errors.
bool malformed(const Error& e) { return e.code() == Code::kOutOfRange || e.code() == Code::kInvalidArgument; }

Expected<bool> find_dynamic_symbol(const ElfFile& f, std::string_view symbol) {
  PB_ASSIGN_OR_RETURN(std::vector<Elf64_Shdr> sections, f.section_headers());
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    PB_ASSIGN_OR_RETURN(std::vector<Elf64_Sym> symbols,
                        f.read_array<Elf64_Sym>(sh.sh_offset, sh.sh_size / sizeof(Elf64_Sym), "the .dynsym section"));
    PB_ASSIGN_OR_RETURN(std::string names,
                        f.read_bytes(strtab.sh_offset, strtab.sh_size, f.size(), "the string table of .dynsym"));
    for (const Elf64_Sym& s : symbols) {
      if (s.st_shndx == SHN_UNDEF || s.st_name >= names.size()) continue;
      const int bind = ELF64_ST_BIND(s.st_info);
      if (bind != STB_GLOBAL && bind != STB_WEAK) continue;
      const size_t end = names.find('\0', s.st_name);
      if (end == std::string::npos) continue;  // not terminated inside the table
      if (std::string_view(names).substr(s.st_name, end - s.st_name) == symbol) return true;
    }
  }
  return false;
}

}  // namespace

Expected<bool> exports_dynamic_symbol(const std::filesystem::path& path, std::string_view symbol) {
  PB_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path));  // missing, unreadable, a FIFO: an error
  Expected<bool> found = [&]() -> Expected<bool> {
    PB_ASSIGN_OR_RETURN(ElfFile f, ElfFile::from_fd(std::move(fd), path));
    return find_dynamic_symbol(f, symbol);
  }();
  if (!found && malformed(found.error())) return false;
  return found;
}

}  // namespace plugboard::fetch
