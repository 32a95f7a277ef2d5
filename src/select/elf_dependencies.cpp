#include "select/elf_dependencies.h"

#include "base/elf_file.h"

#include <elf.h>

#include <deque>
#include <fstream>
#include <glob.h>
#include <set>
#include <sstream>

namespace plugboard::select {
namespace {

std::vector<std::string> split_paths(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The dynamic string table is small (kilobytes); a larger DT_STRSZ is a corrupt file.
constexpr uint64_t kMaxDynamicStrings = uint64_t{64} << 20;

std::unexpected<Error> malformed(const std::filesystem::path& path, const std::string& what) {
  return invalid_argument(path.string() + ": " + what);
}

}  // namespace

Expected<ElfDynamicInfo> read_elf_dynamic_info(const std::filesystem::path& path) {
  PB_ASSIGN_OR_RETURN(ElfFile f, ElfFile::open(path));
  PB_ASSIGN_OR_RETURN(std::vector<Elf64_Phdr> phdrs, f.program_headers());
  auto file_offset = [&](uint64_t vaddr) { return ElfFile::file_offset(phdrs, vaddr); };

  ElfDynamicInfo info;
  const Elf64_Phdr* dynamic = nullptr;
  for (const auto& p : phdrs)
    if (p.p_type == PT_DYNAMIC) dynamic = &p;
  if (!dynamic) return info;  // statically linked: needs nothing

  PB_ASSIGN_OR_RETURN(std::vector<Elf64_Dyn> dyn,
                      f.read_array<Elf64_Dyn>(dynamic->p_offset, dynamic->p_filesz / sizeof(Elf64_Dyn), "the dynamic section"));
  uint64_t strtab = 0, strsz = 0;
  for (const auto& d : dyn) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
  }
  auto strtab_offset = file_offset(strtab);
  if (!strtab_offset || strsz == 0) return malformed(path, "no readable dynamic string table");
  PB_ASSIGN_OR_RETURN(std::string strings, f.read_bytes(*strtab_offset, strsz, kMaxDynamicStrings, "the dynamic string table"));
  auto str = [&](uint64_t off) -> std::optional<std::string> {
    if (off >= strings.size()) return std::nullopt;
    const size_t end = strings.find('\0', static_cast<size_t>(off));
    if (end == std::string::npos) return std::nullopt;  // not terminated inside the table
    return strings.substr(static_cast<size_t>(off), end - static_cast<size_t>(off));
  };
  for (const auto& d : dyn) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag != DT_NEEDED && d.d_tag != DT_RPATH && d.d_tag != DT_RUNPATH) continue;
    auto s = str(d.d_un.d_val);
    if (!s) return malformed(path, "a dynamic entry points outside the string table");
    if (d.d_tag == DT_NEEDED) info.needed.push_back(*s);
    if (d.d_tag == DT_RPATH) info.rpath = split_paths(*s);
    if (d.d_tag == DT_RUNPATH) {
      info.runpath = split_paths(*s);
      info.has_runpath = true;
    }
  }
  return info;
}

namespace {

std::string substitute(std::string dir, const std::filesystem::path& origin) {
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t pos; (pos = dir.find(from)) != std::string::npos;) dir.replace(pos, from.size(), to);
  };
  replace_all("${ORIGIN}", origin.string());
  replace_all("$ORIGIN", origin.string());
  replace_all("${LIB}", "lib64");
  replace_all("$LIB", "lib64");
  replace_all("${PLATFORM}", "x86_64");
  replace_all("$PLATFORM", "x86_64");
  return dir;
}

// The folders /etc/ld.so.conf lists, following "include" globs, one level of nesting per file.
void read_ld_so_conf(const std::filesystem::path& conf, std::vector<std::string>& out, int depth = 0) {
  std::ifstream in(conf);
  if (!in || depth > 8) return;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    if (word == "include") {
      std::string pattern;
      while (words >> pattern) {
        if (!pattern.empty() && pattern[0] != '/') pattern = (conf.parent_path() / pattern).string();
        // Freed however the loop ends (an allocation that fails inside it throws).
        struct Glob {
          glob_t g{};
          ~Glob() { ::globfree(&g); }
        } found;
        if (::glob(pattern.c_str(), 0, nullptr, &found.g) == 0)
          for (size_t i = 0; i < found.g.gl_pathc; ++i) read_ld_so_conf(found.g.gl_pathv[i], out, depth + 1);
      }
    } else if (word[0] == '/') {
      out.push_back(word);
    }
  }
}

bool is_elf_file(const std::filesystem::path& p) {
  // The loader skips files of another ELF class (a 32-bit library of the same name); ElfFile refuses them.
  return ElfFile::open(p).has_value();
}

}  // namespace

std::vector<const Dependency*> DependencyReport::missing() const {
  std::vector<const Dependency*> out;
  for (const auto& d : dependencies)
    if (!d.path) out.push_back(&d);
  return out;
}

std::string DependencyReport::missing_summary() const {
  std::string out;
  for (const Dependency* d : missing())
    out += (out.empty() ? "" : ", ") + d->name + " (needed by " + std::filesystem::path(d->needed_by).filename().string() + ")";
  return out;
}

Expected<DependencyReport> resolve_dependencies(const std::filesystem::path& path, const ResolveOptions& options) {
  PB_ASSIGN_OR_RETURN(ElfDynamicInfo root, read_elf_dynamic_info(path));
  std::vector<std::string> system_dirs;
  read_ld_so_conf(options.ld_so_conf, system_dirs);
  for (const auto& d : options.default_dirs) system_dirs.push_back(d.string());
  const std::vector<std::string> env_dirs = split_paths(options.ld_library_path);

  DependencyReport report;
  std::set<std::string> seen;  // sonames already resolved: the loader loads each once
  struct Pending {
    std::filesystem::path file;
    ElfDynamicInfo info;
  };
  std::deque<Pending> queue;
  queue.push_back({path, std::move(root)});
  while (!queue.empty() && report.dependencies.size() < options.max_libraries) {
    Pending object = std::move(queue.front());
    queue.pop_front();
    const std::filesystem::path origin = object.file.parent_path();
    std::vector<std::string> search;
    if (!object.info.has_runpath)
      for (const auto& d : object.info.rpath) search.push_back(substitute(d, origin));
    search.insert(search.end(), env_dirs.begin(), env_dirs.end());
    for (const auto& d : object.info.runpath) search.push_back(substitute(d, origin));
    search.insert(search.end(), system_dirs.begin(), system_dirs.end());

    for (const auto& name : object.info.needed) {
      if (!seen.insert(name).second) continue;
      Dependency dep{name, object.file.string(), std::nullopt};
      if (name.find('/') != std::string::npos) {
        if (is_elf_file(name)) dep.path = name;
      } else {
        for (const auto& dir : search) {
          std::filesystem::path candidate = std::filesystem::path(dir) / name;
          if (is_elf_file(candidate)) {
            dep.path = candidate;
            break;
          }
        }
      }
      if (dep.path) {
        if (auto info = read_elf_dynamic_info(*dep.path)) queue.push_back({*dep.path, std::move(*info)});
      }
      report.dependencies.push_back(std::move(dep));
    }
  }
  return report;
}

std::optional<std::filesystem::path> find_system_library(const std::string& soname, const ResolveOptions& options) {
  std::vector<std::string> dirs = split_paths(options.ld_library_path);
  read_ld_so_conf(options.ld_so_conf, dirs);
  for (const auto& d : options.default_dirs) dirs.push_back(d.string());
  for (const auto& dir : dirs)
    if (std::filesystem::path p = std::filesystem::path(dir) / soname; is_elf_file(p)) return p;
  return std::nullopt;
}

}  // namespace plugboard::select
