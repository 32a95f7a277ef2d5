#include "bundle/discovery.h"

#include <algorithm>
#include <sstream>

#include "base/environment.h"
#include "base/no_throw.h"
#include "bundle/manifest.h"
#include "fetch/elf_symbols.h"
#include "platforms/registry.h"

namespace plugboard::bundle {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool is_shared_library(const fs::path& p) {
  const std::string n = p.filename().string();
  return n.size() > 3 && (n.ends_with(".so") || n.find(".so.") != std::string::npos);
}

// The entries of `dir`, sorted; a folder that cannot be listed adds a note and yields what was read.
std::vector<fs::path> sorted_entries(const fs::path& dir, std::vector<std::string>* notes = nullptr) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  if (ec && notes && ec != std::errc::no_such_file_or_directory)
    notes->push_back("cannot list " + dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

// Whether something (a dangling or looping symlink included) is at `p`: lstat, never a throw. A path
// that cannot be looked at (EACCES, ENAMETOOLONG, ...) is an error naming it.
Expected<bool> present(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (st.type() == fs::file_type::not_found) return false;
  if (ec) return make_error(Code::kPermissionDenied, "cannot look at " + p.string() + ": " + ec.message());
  return true;
}

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A plugin file found through PLUGBOARD_PLUGIN_PATH: named after the file ("libpjrt_cpu.so": pjrt_cpu),
// its platform guessed from the name.
select::Candidate plugin_path_candidate(const fs::path& file, std::string source) {
  select::Candidate c;
  c.name = file.stem().string();
  if (c.name.starts_with("lib")) c.name.erase(0, 3);
  c.path = file;
  c.source = std::move(source);
  c.origin = "environment";
  guess_platform(c);
  return c;
}

// A PLUGBOARD_PLUGIN_PATH entry that names a file: a candidate when it is a PJRT plugin (an ELF shared
// library exporting GetPjrtApi, read without loading it); refused with a note otherwise.
std::optional<select::Candidate> plugin_file_candidate(const fs::path& file, std::vector<std::string>& notes) {
  const std::string var = "PLUGBOARD_PLUGIN_PATH: ";
  auto exports = fetch::exports_dynamic_symbol(file, "GetPjrtApi");
  if (!exports) {
    notes.push_back(var + "refused the file " + file.string() + ": " + exports.error().to_string());
    return std::nullopt;
  }
  if (!*exports) {
    notes.push_back(var + "refused the file " + file.string() +
                    ": it is not a PJRT plugin (an ELF shared library that exports GetPjrtApi); an entry is a plugin file, "
                    "a folder of plugins or a bundle folder");
    return std::nullopt;
  }
  return plugin_path_candidate(file, "PLUGBOARD_PLUGIN_PATH " + file.string());
}

}  // namespace

void guess_platform(select::Candidate& c) {
  const platforms::PlatformTraits* p = platforms::platform_named_in(c.name + " " + c.path.filename().string());
  if (!p) {
    c.platform = "unknown";
    return;
  }
  c.platform = p->name;
  c.probe = p->probe;
  c.priority = p->priority;
}

std::vector<select::Candidate> candidates_from_plugin_path(const std::string& value, std::vector<std::string>& notes) {
  std::vector<select::Candidate> out;
  const std::string var = "PLUGBOARD_PLUGIN_PATH: ";
  for (const auto& dir : split(value, ':')) {
    if (!is_folder(dir)) {
      if (is_regular(dir)) {
        if (auto c = plugin_file_candidate(dir, notes)) out.push_back(std::move(*c));
      } else {
        auto there = present(dir);
        notes.push_back(var + (!there ? there.error().message()
                               : *there ? dir + " is neither a folder nor a regular file"
                                        : dir + " does not exist"));
      }
      continue;
    }
    // A folder that is a bundle, or holds bundles and plugins.
    std::vector<fs::path> bundles, plugins;
    auto self = present(fs::path(dir) / kManifestName);
    if (!self) {
      notes.push_back(var + self.error().message());
      continue;
    }
    if (*self) bundles.push_back(dir);
    else
      for (const auto& e : sorted_entries(dir, &notes)) {
        auto bundle = present(e / kManifestName);
        if (!bundle) {
          if (is_folder(e)) notes.push_back(var + bundle.error().message());
          continue;
        }
        if (*bundle) bundles.push_back(e);
        else if (is_shared_library(e) && is_regular(e)) plugins.push_back(e);
      }
    for (const auto& b : bundles) {
      auto m = read_manifest(b);
      if (!m) {
        notes.push_back(var + "skipped bundle " + b.string() + ": " + m.error().to_string());
        continue;
      }
      if (m->targets.empty()) notes.push_back(var + "bundle " + b.string() + " has no targets (" + kManifestName + ": \"targets\" is empty)");
      for (auto& c : bundle_candidates(b, *m)) {
        c.source = "PLUGBOARD_PLUGIN_PATH " + c.source;
        c.origin = "environment";
        out.push_back(std::move(c));
      }
    }
    for (const auto& p : plugins) out.push_back(plugin_path_candidate(p, "PLUGBOARD_PLUGIN_PATH " + dir));
  }
  return out;
}

std::vector<select::Candidate> candidates_from_jax_names(const std::string& value, std::vector<std::string>& notes) {
  std::vector<select::Candidate> out;
  for (const auto& item : split(value, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      notes.push_back("PJRT_NAMES_AND_LIBRARY_PATHS: '" + item + "' is not name:path, skipped");
      continue;
    }
    select::Candidate c;
    c.name = item.substr(0, colon);
    c.path = item.substr(colon + 1);
    c.source = "PJRT_NAMES_AND_LIBRARY_PATHS";
    c.origin = "environment";
    guess_platform(c);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<select::Candidate> candidates_from_site_packages(const fs::path& site, std::vector<std::string>& notes) {
  std::vector<select::Candidate> out;
  for (const char* ns : {"jax_plugins", "xla_plugins"}) {
    for (const auto& pkg : sorted_entries(site / ns, &notes)) {
      if (!is_folder(pkg)) continue;
      bool found = false;
      for (const auto& f : sorted_entries(pkg, &notes)) {
        if (!is_shared_library(f)) continue;
        select::Candidate c;
        c.name = pkg.filename().string();
        if (c.name.starts_with("xla_")) c.name.erase(0, 4);
        c.path = f;
        c.source = "python " + (site / ns).string();
        c.origin = "python";
        guess_platform(c);
        out.push_back(std::move(c));
        found = true;
        break;  // one plugin per package
      }
      if (!found) notes.push_back(pkg.string() + ": no shared library in this plugin package");
    }
  }
  return out;
}

Expected<Discovery> discover(const DiscoveryOptions& options) noexcept {
  return no_throw("discovering plugins", [&]() -> Expected<Discovery> {
    Discovery d;
    if (options.bundle) {
      PB_ASSIGN_OR_RETURN(Manifest m, read_manifest(*options.bundle));
      if (m.targets.empty())
        return make_error(Code::kNotFound, "bundle " + options.bundle->string() + " has no targets: " +
                                               (*options.bundle / kManifestName).string() + " lists none (\"targets\": [])");
      d.candidates = bundle_candidates(*options.bundle, m);
    }
    if (options.environment) {
      // Read with secure_getenv: a setuid/setgid process takes no plugin from its caller's environment.
      if (auto v = environment_override("PLUGBOARD_PLUGIN_PATH"))
        for (auto& c : candidates_from_plugin_path(*v, d.notes)) d.candidates.push_back(std::move(c));
      if (auto v = environment_override("PJRT_NAMES_AND_LIBRARY_PATHS"))
        for (auto& c : candidates_from_jax_names(*v, d.notes)) d.candidates.push_back(std::move(c));
    }
    for (const auto& site : options.site_packages)
      for (auto& c : candidates_from_site_packages(site, d.notes)) d.candidates.push_back(std::move(c));
    return d;
  });
}

}  // namespace plugboard::bundle
