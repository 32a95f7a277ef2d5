#include "bundle/assemble.h"

#include <unistd.h>

#include "base/sha256.h"
#include "fetch/wheel.h"
#include "plugin/plugin.h"

namespace plugboard::bundle {
namespace {


// Copies `from` to `to` through a temp file (a hard link when on the same file system).
Status place_file(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::create_directories(to.parent_path(), ec);
  if (ec) return make_error(Code::kPermissionDenied, "cannot create " + to.parent_path().string() + ": " + ec.message());
  const std::filesystem::path tmp = to.string() + ".tmp." + std::to_string(::getpid());
  std::filesystem::remove(tmp, ec);
  std::filesystem::create_hard_link(from, tmp, ec);
  if (ec) {
    ec.clear();
    std::filesystem::copy_file(from, tmp, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) {
      std::filesystem::remove(tmp, ec);
      return make_error(Code::kPermissionDenied, "cannot copy " + from.string() + " into the bundle: " + ec.message());
    }
  }
  std::filesystem::rename(tmp, to, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return make_error(Code::kPermissionDenied, "cannot write " + to.string() + ": " + ec.message());
  }
  return ok();
}

}  // namespace

Expected<Manifest> write_bundle(const std::filesystem::path& dir, const std::vector<TargetSource>& targets) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(Code::kPermissionDenied, "cannot create bundle folder " + dir.string() + ": " + ec.message());
  Manifest manifest;
  if (std::filesystem::exists(dir / kManifestName)) {
    PB_ASSIGN_OR_RETURN(manifest, read_manifest(dir));
  }
  for (const TargetSource& t : targets) {
    if (!std::filesystem::is_regular_file(t.file, ec))
      return make_error(Code::kNotFound, "target " + t.name + ": plugin file " + t.file.string() + " does not exist");
    std::string sha;
    if (t.sha256) sha = *t.sha256;
    else {
      PB_ASSIGN_OR_RETURN(sha, sha256_file(t.file));
    }
    TargetEntry e;
    e.name = t.name;
    e.platform = t.platform;
    e.file = "plugins/" + sha.substr(0, 16) + "/" + t.file.filename().string();
    const std::filesystem::path dest = dir / e.file;
    // Stored once: a file already there with this content (same name under the same hash) is reused.
    if (!std::filesystem::exists(dest, ec)) PB_RETURN_IF_ERROR(place_file(t.file, dest));
    e.size = std::filesystem::file_size(dest, ec);
    e.sha256 = sha;
    e.probe = t.probe;
    e.priority = t.priority;
    e.create_options = t.create_options;
    e.provenance = t.provenance;
    if (t.probe != select::ProbeKind::kTpu) {
      // Loading reads the versions; a plugin that cannot load (ROCm without its runtime) is bundled
      // without them: the dependency stage explains it at boot.
      if (auto plugin = load_plugin(dest)) {
        e.pjrt_api = (*plugin)->version().to_string();
        if (auto v = (*plugin)->stablehlo_current_version()) e.stablehlo_current = v->to_string();
        if (auto v = (*plugin)->stablehlo_minimum_version()) e.stablehlo_minimum = v->to_string();
      }
    }
    std::erase_if(manifest.targets, [&](const TargetEntry& old) { return old.name == t.name; });
    manifest.targets.push_back(std::move(e));
  }
  PB_RETURN_IF_ERROR(write_manifest(dir, manifest));
  return manifest;
}

namespace {
Expected<TargetEntry*> find_target(Manifest& manifest, const std::filesystem::path& dir, const std::string& target) {
  for (auto& t : manifest.targets)
    if (t.name == target) return &t;
  return invalid_argument("the bundle " + dir.string() + " has no target " + target);
}
}  // namespace

Expected<size_t> add_companion_wheel(const std::filesystem::path& dir, const std::string& target,
                                     const std::filesystem::path& wheel_path, const std::string& from) {
  PB_ASSIGN_OR_RETURN(Manifest manifest, read_manifest(dir));
  PB_ASSIGN_OR_RETURN(TargetEntry * entry, annotate(find_target(manifest, dir, target), "--companion"));
  PB_ASSIGN_OR_RETURN(fetch::Wheel wheel, fetch::Wheel::open(wheel_path));
  size_t added = 0;
  for (const fetch::WheelMember& m : wheel.members()) {
    const std::string name = std::filesystem::path(m.name).filename().string();
    const bool shared = name.ends_with(".so") || name.find(".so.") != std::string::npos;
    if (!shared || m.name.ends_with("/")) continue;
    const std::string rel = "plugins/" + m.name;
    // A member named to escape (absolute, "..") is refused like a manifest entry would be.
    PB_ASSIGN_OR_RETURN(std::filesystem::path dest,
                        annotate(resolve_in_bundle(dir, rel, "companion " + m.name), "in wheel " + wheel_path.string()));
    std::error_code ec;
    std::filesystem::create_directories(dest.parent_path(), ec);
    if (ec) return make_error(Code::kPermissionDenied, "cannot create " + dest.parent_path().string() + ": " + ec.message());
    PB_ASSIGN_OR_RETURN(fetch::ExtractedMember x, wheel.extract(m, dest.parent_path(), false));
    PB_RETURN_IF_ERROR(x.file.commit(dest, 0755));
    std::erase_if(entry->companions, [&](const CompanionFile& c) { return c.file == rel; });
    entry->companions.push_back({rel, x.size, x.sha256, from});
    ++added;
  }
  if (added == 0) return invalid_argument("companion wheel " + wheel_path.string() + " holds no shared library");
  PB_RETURN_IF_ERROR(write_manifest(dir, manifest));
  return added;
}

Status add_companion_file(const std::filesystem::path& dir, const std::string& target,
                          const std::filesystem::path& file, const std::string& from) {
  PB_ASSIGN_OR_RETURN(Manifest manifest, read_manifest(dir));
  PB_ASSIGN_OR_RETURN(TargetEntry * entry, find_target(manifest, dir, target));
  const std::string rel = (std::filesystem::path(entry->file).parent_path() / file.filename()).string();
  PB_ASSIGN_OR_RETURN(std::filesystem::path dest, resolve_in_bundle(dir, rel, "companion " + file.filename().string()));
  PB_ASSIGN_OR_RETURN(std::string sha, sha256_file(file));
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) return make_error(Code::kNotFound, "cannot read " + file.string() + ": " + ec.message());
  PB_RETURN_IF_ERROR(place_file(file, dest));
  std::erase_if(entry->companions, [&](const CompanionFile& c) { return c.file == rel; });
  entry->companions.push_back({rel, static_cast<uint64_t>(size), sha, from});
  return write_manifest(dir, manifest);
}

}  // namespace plugboard::bundle
