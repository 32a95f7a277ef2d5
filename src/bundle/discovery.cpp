#include "bundle/discovery.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "bundle/manifest.h"

namespace plugboard::bundle {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool is_shared_library(const std::filesystem::path& p) {
  const std::string n = p.filename().string();
  return n.size() > 3 && (n.ends_with(".so") || n.find(".so.") != std::string::npos);
}

std::vector<std::filesystem::path> sorted_entries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void guess_platform(select::Candidate& c) {
  std::string n = c.name + " " + c.path.filename().string();
  std::transform(n.begin(), n.end(), n.begin(), ::tolower);
  if (n.find("cuda") != std::string::npos) c.platform = "cuda", c.probe = select::ProbeKind::kCuda, c.priority = 100;
  else if (n.find("rocm") != std::string::npos) c.platform = "rocm", c.probe = select::ProbeKind::kRocm, c.priority = 90;
  else if (n.find("tpu") != std::string::npos) c.platform = "tpu", c.probe = select::ProbeKind::kTpu, c.priority = 110;
  else if (n.find("cpu") != std::string::npos) c.platform = "cpu", c.probe = select::ProbeKind::kNone, c.priority = 10;
  else c.platform = "unknown";
}

std::vector<select::Candidate> candidates_from_plugin_path(const std::string& value, std::vector<std::string>& notes) {
  std::vector<select::Candidate> out;
  for (const auto& dir : split(value, ':')) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      notes.push_back("PLUGBOARD_PLUGIN_PATH: " + dir + " is not a folder");
      continue;
    }
    // A folder that is a bundle, or holds bundles and plugins.
    std::vector<std::filesystem::path> bundles, plugins;
    if (std::filesystem::exists(std::filesystem::path(dir) / kManifestName)) bundles.push_back(dir);
    else
      for (const auto& e : sorted_entries(dir)) {
        if (std::filesystem::exists(e / kManifestName, ec)) bundles.push_back(e);
        else if (is_shared_library(e) && std::filesystem::is_regular_file(e, ec)) plugins.push_back(e);
      }
    for (const auto& b : bundles) {
      auto m = read_manifest(b);
      if (!m) {
        notes.push_back("PLUGBOARD_PLUGIN_PATH: skipped bundle " + b.string() + ": " + m.error().to_string());
        continue;
      }
      for (auto& c : bundle_candidates(b, *m)) {
        c.source = "PLUGBOARD_PLUGIN_PATH " + c.source;
        out.push_back(std::move(c));
      }
    }
    for (const auto& p : plugins) {
      select::Candidate c;
      c.name = p.stem().string();
      if (c.name.starts_with("lib")) c.name.erase(0, 3);
      c.path = p;
      c.source = "PLUGBOARD_PLUGIN_PATH " + dir;
      guess_platform(c);
      out.push_back(std::move(c));
    }
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
    guess_platform(c);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<select::Candidate> candidates_from_site_packages(const std::filesystem::path& site, std::vector<std::string>& notes) {
  std::vector<select::Candidate> out;
  for (const char* ns : {"jax_plugins", "xla_plugins"}) {
    for (const auto& pkg : sorted_entries(site / ns)) {
      std::error_code ec;
      if (!std::filesystem::is_directory(pkg, ec)) continue;
      bool found = false;
      for (const auto& f : sorted_entries(pkg)) {
        if (!is_shared_library(f)) continue;
        select::Candidate c;
        c.name = pkg.filename().string();
        if (c.name.starts_with("xla_")) c.name.erase(0, 4);
        c.path = f;
        c.source = "python " + (site / ns).string();
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

Expected<Discovery> discover(const DiscoveryOptions& options) {
  Discovery d;
  if (options.bundle) {
    PB_ASSIGN_OR_RETURN(Manifest m, read_manifest(*options.bundle));
    d.candidates = bundle_candidates(*options.bundle, m);
  }
  if (options.environment) {
    if (const char* v = std::getenv("PLUGBOARD_PLUGIN_PATH"); v && *v)
      for (auto& c : candidates_from_plugin_path(v, d.notes)) d.candidates.push_back(std::move(c));
    if (const char* v = std::getenv("PJRT_NAMES_AND_LIBRARY_PATHS"); v && *v)
      for (auto& c : candidates_from_jax_names(v, d.notes)) d.candidates.push_back(std::move(c));
  }
  for (const auto& site : options.site_packages)
    for (auto& c : candidates_from_site_packages(site, d.notes)) d.candidates.push_back(std::move(c));
  return d;
}

}  // namespace plugboard::bundle
