// The one ELF reader (base/elf_file.h) and the checks before dlopen: truncated plugins, files that are
// not libraries, and crafted headers whose offsets and counts lie (huge counts, offsets near 2^64,
// sizes past the end of the file). Every case is an error value, never a fault, a hang or a huge
// allocation.
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>

#include "base/elf_file.h"
#include "fetch/elf_symbols.h"
#include "plugin/plugin.h"
#include "select/elf_dependencies.h"
#include "test_env.h"

namespace plugboard {
namespace {

// The first `bytes` bytes of `from`, written to `to`.
void copy_prefix(const std::filesystem::path& from, const std::filesystem::path& to, uint64_t bytes) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  std::vector<char> block(1 << 20);
  while (bytes > 0 && in) {
    const auto n = static_cast<std::streamsize>(std::min<uint64_t>(bytes, block.size()));
    in.read(block.data(), n);
    out.write(block.data(), in.gcount());
    bytes -= static_cast<uint64_t>(in.gcount());
  }
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

TEST(ElfFileTest, RealPluginsAreLoadableLibraries) {
  std::vector<testing::RealPlugin> all = testing::cpu_plugins();
  all.push_back(testing::cuda_plugin());
  for (const auto& p : all) {
    auto f = ElfFile::open(p.path);
    PB_ASSERT_OK(f);
    PB_ASSERT_OK(f->check_loadable());
    EXPECT_EQ(f->header().e_type, ET_DYN) << p.name;
    auto phdrs = f->program_headers();
    PB_ASSERT_OK(phdrs);
    EXPECT_FALSE(phdrs->empty());
    auto shdrs = f->section_headers();
    PB_ASSERT_OK(shdrs);
    EXPECT_FALSE(shdrs->empty());
  }
}

// `head -c N plugin.so` at several sizes: refused before dlopen (which would fault with SIGBUS touching
// the pages past the end of the file), naming the file and what lies outside it.
TEST(ElfFileTest, TruncatedRealPluginIsRefusedBeforeDlopen) {
  const auto& real = testing::cpu_plugins()[0].path;
  const uint64_t size = std::filesystem::file_size(real);
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  for (uint64_t cut : {uint64_t{64}, uint64_t{4096}, uint64_t{100000}, size / 2, size - 1}) {
    SCOPED_TRACE("truncated to " + std::to_string(cut) + " bytes");
    auto path = dir / ("cut_" + std::to_string(cut) + ".so");
    copy_prefix(real, path, cut);
    ASSERT_EQ(std::filesystem::file_size(path), cut);
    auto r = load_plugin(path);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << r.error().to_string();
    const std::string m = r.error().message();
    EXPECT_TRUE(contains(m, path.string())) << m;
    EXPECT_TRUE(contains(m, "lies outside the file (" + std::to_string(cut) + " bytes)")) << m;
    // The other readers refuse it too, without faulting or allocating what the headers claim.
    auto elf = ElfFile::open(path);
    PB_ASSERT_OK(elf);
    EXPECT_FALSE(elf->check_loadable());
    (void)select::read_elf_dynamic_info(path);
    (void)fetch::exports_dynamic_symbol(path, "GetPjrtApi");
    std::filesystem::remove(path);
  }
  std::filesystem::remove_all(dir);
}

TEST(ElfFileTest, FilesThatAreNotLibrariesAreRefused) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  write_bytes(dir / "text.so", "this is a text file, not a shared library\n");
  write_bytes(dir / "empty.so", "");
  write_bytes(dir / "header_only.so", std::string("\x7f" "ELF\x02\x01\x01", 7));
  for (const char* name : {"text.so", "empty.so", "header_only.so"}) {
    auto r = load_plugin(dir / name);
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << r.error().to_string();
    EXPECT_TRUE(contains(r.error().message(), (dir / name).string())) << r.error().to_string();
  }
  EXPECT_TRUE(contains(load_plugin(dir / "empty.so").error().message(), "empty"));
  EXPECT_TRUE(contains(load_plugin(dir / "header_only.so").error().message(), "truncated ELF file"));

  // A directory.
  auto d = load_plugin(dir);
  ASSERT_FALSE(d);
  EXPECT_TRUE(contains(d.error().message(), "a directory")) << d.error().to_string();

  // A FIFO without a writer: refused at once, where opening it for reading would block for ever.
  const auto fifo = dir / "fifo.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto pending = std::async(std::launch::async, [&] { return load_plugin(fifo); });
  if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Unblock the old code's open() so that the test fails instead of hanging.
    UniqueFd writer(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // opened and closed at once
    FAIL() << "load_plugin blocked on a FIFO";
  }
  auto f = pending.get();
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(f.error().message(), "a FIFO")) << f.error().to_string();
  std::filesystem::remove_all(dir);
}

// A minimal ELF64 shared-library header for this machine, to be lied into.
Elf64_Ehdr crafted_header() {
  Elf64_Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = ELFCLASS64;
  h.e_ident[EI_DATA] = ELFDATA2LSB;
  h.e_ident[EI_VERSION] = EV_CURRENT;
  h.e_type = ET_DYN;
  h.e_machine = native_elf_machine();
  h.e_version = EV_CURRENT;
  h.e_ehsize = sizeof(Elf64_Ehdr);
  h.e_phentsize = sizeof(Elf64_Phdr);
  h.e_shentsize = sizeof(Elf64_Shdr);
  return h;
}

template <class T>
std::string bytes_of(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

TEST(ElfFileTest, CraftedHugeCountsAndOffsetsAreRefusedWithoutAllocating) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  struct Case {
    std::string name;
    Elf64_Ehdr header;
    std::string expect;
  };
  std::vector<Case> cases;
  {
    Elf64_Ehdr h = crafted_header();
    h.e_phoff = sizeof(Elf64_Ehdr);
    h.e_phnum = 0xfffe;  // 3.6 MB of program headers in a 64-byte file
    cases.push_back({"huge_phnum", h, "the program header table (65534 entries)"});
  }
  {
    Elf64_Ehdr h = crafted_header();
    h.e_phoff = ~uint64_t{0} - 16;  // offset + size wraps past 2^64
    h.e_phnum = 4;
    cases.push_back({"phoff_near_2_64", h, "past 2^64"});
  }
  {
    Elf64_Ehdr h = crafted_header();
    h.e_shoff = ~uint64_t{0} - 63;
    h.e_shnum = 0xffff;
    cases.push_back({"shoff_near_2_64", h, "the section header table"});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = dir / (c.name + ".so");
    write_bytes(path, bytes_of(c.header));
    auto f = ElfFile::open(path);
    PB_ASSERT_OK(f);
    auto loadable = f->check_loadable();
    ASSERT_FALSE(loadable);
    auto phdrs = f->program_headers();
    auto shdrs = f->section_headers();
    const std::string said = loadable.error().message() + "\n" + (phdrs ? "" : phdrs.error().message()) + "\n" +
                             (shdrs ? "" : shdrs.error().message());
    EXPECT_TRUE(contains(said, c.expect)) << said;
    auto r = load_plugin(path);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << r.error().to_string();
    (void)select::read_elf_dynamic_info(path);
    auto exports = fetch::exports_dynamic_symbol(path, "GetPjrtApi");
    EXPECT_TRUE(!exports || !*exports);
  }
  std::filesystem::remove_all(dir);
}

TEST(ElfFileTest, ExtendedSectionCountBeyondTheFileIsRefused) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  Elf64_Ehdr h = crafted_header();
  h.e_shoff = sizeof(Elf64_Ehdr);
  h.e_shnum = 0;  // extended numbering: section 0's sh_size holds the count
  Elf64_Shdr first{};
  first.sh_size = uint64_t{1} << 40;
  write_bytes(dir / "x.so", bytes_of(h) + bytes_of(first));
  auto f = ElfFile::open(dir / "x.so");
  PB_ASSERT_OK(f);
  auto s = f->section_headers();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), Code::kOutOfRange);
  EXPECT_TRUE(contains(s.error().message(), "1099511627776 entries")) << s.error().to_string();
  std::filesystem::remove_all(dir);
}

// A .dynsym whose offset + size wraps past 2^64: the old reader's check `off + size > file_size` passed
// and it then allocated 2^62 bytes' worth of symbols (an exception out of a no-throw library).
TEST(ElfFileTest, DynsymRangeThatWrapsIsNotFollowed) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  Elf64_Ehdr h = crafted_header();
  h.e_shoff = sizeof(Elf64_Ehdr);
  h.e_shnum = 3;
  Elf64_Shdr null_section{}, dynsym{}, strtab{};
  dynsym.sh_type = SHT_DYNSYM;
  dynsym.sh_entsize = sizeof(Elf64_Sym);
  dynsym.sh_link = 2;
  dynsym.sh_offset = ~uint64_t{0} - 7;
  dynsym.sh_size = uint64_t{1} << 62;
  strtab.sh_type = SHT_STRTAB;
  strtab.sh_offset = 0;
  strtab.sh_size = 16;
  write_bytes(dir / "wrap.so", bytes_of(h) + bytes_of(null_section) + bytes_of(dynsym) + bytes_of(strtab));
  auto exports = fetch::exports_dynamic_symbol(dir / "wrap.so", "GetPjrtApi");
  PB_ASSERT_OK(exports);
  EXPECT_FALSE(*exports);
  auto f = ElfFile::open(dir / "wrap.so");
  PB_ASSERT_OK(f);
  auto loadable = f->check_loadable();
  ASSERT_FALSE(loadable);  // no PT_LOAD, and section 1 lies outside the file

  // A string table whose size lies beyond the file, the .dynsym itself in bounds.
  dynsym.sh_offset = 0;
  dynsym.sh_size = sizeof(Elf64_Sym);
  strtab.sh_size = uint64_t{1} << 61;
  write_bytes(dir / "strtab.so", bytes_of(h) + bytes_of(null_section) + bytes_of(dynsym) + bytes_of(strtab));
  auto e2 = fetch::exports_dynamic_symbol(dir / "strtab.so", "GetPjrtApi");
  PB_ASSERT_OK(e2);
  EXPECT_FALSE(*e2);
  std::filesystem::remove_all(dir);
}

// A PT_DYNAMIC segment claiming 2^60 bytes and a DT_STRSZ beyond the file: the old dependency reader
// allocated both sizes before checking them.
TEST(ElfFileTest, DynamicSegmentSizesBeyondTheFileAreErrors) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  Elf64_Ehdr h = crafted_header();
  h.e_phoff = sizeof(Elf64_Ehdr);
  h.e_phnum = 1;
  Elf64_Phdr dyn{};
  dyn.p_type = PT_DYNAMIC;
  dyn.p_offset = sizeof(Elf64_Ehdr);
  dyn.p_filesz = uint64_t{1} << 60;
  write_bytes(dir / "dyn.so", bytes_of(h) + bytes_of(dyn));
  auto r = select::read_elf_dynamic_info(dir / "dyn.so");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error().message(), "the dynamic section")) << r.error().to_string();
  EXPECT_TRUE(contains(r.error().message(), "dyn.so")) << r.error().to_string();

  // In bounds, but its DT_STRSZ is 2^40 bytes.
  h.e_phnum = 2;
  Elf64_Phdr load{};
  load.p_type = PT_LOAD;
  load.p_offset = 0;
  load.p_vaddr = 0;
  load.p_filesz = load.p_memsz = 512;
  const uint64_t dyn_at = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr);
  Elf64_Dyn entries[3] = {};
  entries[0].d_tag = DT_STRTAB;
  entries[0].d_un.d_ptr = 0;
  entries[1].d_tag = DT_STRSZ;
  entries[1].d_un.d_val = uint64_t{1} << 40;
  entries[2].d_tag = DT_NULL;
  dyn.p_offset = dyn_at;
  dyn.p_filesz = sizeof(entries);
  std::string file = bytes_of(h) + bytes_of(load) + bytes_of(dyn) + std::string(reinterpret_cast<const char*>(entries), sizeof(entries));
  file.resize(512, '\0');
  write_bytes(dir / "strsz.so", file);
  auto s = select::read_elf_dynamic_info(dir / "strsz.so");
  ASSERT_FALSE(s);
  EXPECT_TRUE(contains(s.error().message(), "the dynamic string table")) << s.error().to_string();
  std::filesystem::remove_all(dir);
}

TEST(ElfFileTest, WrongMachineOrTypeIsRefusedNamingIt) {
  const testing::ScratchDir scratch;
  const std::filesystem::path& dir = scratch.path();
  // A real plugin's first 4 KB with another machine written into its header.
  copy_prefix(testing::cpu_plugins()[0].path, dir / "other.so", 4096);
  {
    std::fstream f(dir / "other.so", std::ios::in | std::ios::out | std::ios::binary);
    const uint16_t machine = EM_RISCV == native_elf_machine() ? EM_X86_64 : EM_RISCV;
    f.seekp(offsetof(Elf64_Ehdr, e_machine));
    f.write(reinterpret_cast<const char*>(&machine), sizeof(machine));
  }
  auto r = load_plugin(dir / "other.so");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(r.error().message(), "for another machine")) << r.error().to_string();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace plugboard
