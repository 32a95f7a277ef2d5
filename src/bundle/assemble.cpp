// assemble_bundle: check the whole plan, lock the bundle, check the resulting manifest, stage and place
// the files, write the manifest last.
#include "bundle/assemble.h"

#include <unistd.h>

#include <set>

#include "base/no_throw.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "fetch/file_lock.h"
#include "fetch/plugin_member.h"
#include "base/atomic_file.h"
#include "base/temp_dir.h"
#include "fetch/wheel.h"
#include "platforms/registry.h"
#include "plugin/plugin.h"

namespace plugboard::bundle {
namespace {

namespace fs = std::filesystem;

// Copies `from` to `to` through a temp file (a hard link when on the same file system), moved into
// place durably (base/atomic_file.h).
Status place_file(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (ec) return make_error(Code::kPermissionDenied, "cannot create " + to.parent_path().string() + ": " + ec.message());
  const fs::path tmp = to.string() + ".tmp." + std::to_string(::getpid());
  fs::remove(tmp, ec);
  fs::create_hard_link(from, tmp, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      fs::remove(tmp, ec);
      return make_error(Code::kPermissionDenied, "cannot copy " + from.string() + " into the bundle: " + ec.message());
    }
  }
  if (Status moved = move_file_durably(tmp, to); !moved) {
    fs::remove(tmp, ec);
    return std::unexpected(std::move(moved).error().annotate("writing " + to.string() + " into the bundle"));
  }
  return ok();
}

Expected<uint64_t> size_of(const fs::path& file) {
  PB_ASSIGN_OR_RETURN(FileIdentity id, file_identity(file));
  return id.size;
}

// A target of the plan, checked: its manifest entry (file, size, sha256, versions) and where it comes from.
struct CheckedTarget {
  TargetEntry entry;
  fs::path source;
};

Expected<CheckedTarget> check_target(const TargetSource& t) {
  const std::string what = "target " + t.name;
  if (t.name.empty()) return invalid_argument("a target has no name");
  std::set<std::string> keys;
  for (const NamedValue& o : t.create_options) {
    if (o.name.empty()) return invalid_argument(what + ": a create option has no name");
    if (!keys.insert(o.name).second) return invalid_argument(what + ": create option " + o.name + " is given twice");
  }
  PB_RETURN_IF_ERROR(fetch::check_pjrt_plugin_file(t.file, what + ": plugin file " + t.file.string()));
  CheckedTarget c;
  c.source = t.file;
  TargetEntry& e = c.entry;
  if (t.sha256) e.sha256 = *t.sha256;
  else {
    PB_ASSIGN_OR_RETURN(e.sha256, annotate(sha256_file(t.file), what));
  }
  if (!is_sha256_hex(e.sha256)) return invalid_argument(what + ": \"" + e.sha256 + "\" is not a sha256");
  PB_ASSIGN_OR_RETURN(e.size, annotate(size_of(t.file), what));
  e.name = t.name;
  e.platform = t.platform;
  e.file = "plugins/" + e.sha256.substr(0, 16) + "/" + t.file.filename().string();
  e.probe = t.probe;
  e.priority = t.priority;
  e.create_options = t.create_options;
  e.provenance = t.provenance;
  // A platform never loaded without its device (TPU: platforms/registry.h) is bundled unread.
  if (const platforms::PlatformTraits* p = platforms::platform_for_probe(t.probe); !p || !p->probe_mandatory) {
    // Loading reads the versions; a plugin that cannot load (ROCm without its runtime) is bundled
    // without them: the dependency stage explains it at boot.
    if (auto plugin = load_plugin(t.file)) {
      e.pjrt_api = (*plugin)->version().to_string();
      if (auto v = (*plugin)->stablehlo_current_version()) e.stablehlo_current = v->to_string();
      if (auto v = (*plugin)->stablehlo_minimum_version()) e.stablehlo_minimum = v->to_string();
    }
  }
  return c;
}

struct CheckedWheel {
  fetch::Wheel wheel;
  std::vector<const fetch::WheelMember*> libraries;
};

Expected<CheckedWheel> check_companion_wheel(const CompanionWheelSource& c) {
  PB_ASSIGN_OR_RETURN(fetch::Wheel wheel, fetch::Wheel::open(c.wheel));
  CheckedWheel out{std::move(wheel), {}};
  for (const fetch::WheelMember& m : out.wheel.members()) {
    if (m.name.ends_with("/") || !fetch::is_shared_library_name(m.name)) continue;
    PB_RETURN_IF_ERROR(out.wheel.check_member(m));
    out.libraries.push_back(&m);
  }
  if (out.libraries.empty()) return invalid_argument("companion wheel " + c.wheel.string() + " holds no shared library");
  return out;
}

struct CheckedFile {
  std::string sha256;
  uint64_t size = 0;
};

Expected<CheckedFile> check_companion_file(const CompanionFileSource& c) {
  PB_RETURN_IF_ERROR(annotate(open_regular_file(c.file), "companion file"));
  CheckedFile out;
  PB_ASSIGN_OR_RETURN(out.sha256, sha256_file(c.file));
  PB_ASSIGN_OR_RETURN(out.size, size_of(c.file));
  return out;
}

Expected<TargetEntry*> find_target(Manifest& manifest, const fs::path& dir, const std::string& target) {
  for (auto& t : manifest.targets)
    if (t.name == target) return &t;
  return invalid_argument("the bundle " + dir.string() + " has no target " + target);
}

void set_companion(TargetEntry& entry, CompanionFile file) {
  std::erase_if(entry.companions, [&](const CompanionFile& c) { return c.file == file.file; });
  entry.companions.push_back(std::move(file));
}

// The manifest as the manifest reader will read it, before the bundle is touched: written to a scratch
// folder and read back, so that every rule of the reader (names, duplicates, create options, paths)
// holds for what is about to be written. Errors name the bundle's manifest, not the scratch folder.
Status check_manifest(const fs::path& dir, const Manifest& manifest) {
  std::error_code ec;
  PB_ASSIGN_OR_RETURN(TempDir scratch, TempDir::create(fs::temp_directory_path(ec), "pb-bundle-check-"));
  PB_RETURN_IF_ERROR(write_manifest(scratch.path(), manifest));
  auto read = read_manifest(scratch.path());
  if (read) return ok();
  std::string message = read.error().message();
  const std::string from = scratch.path().string(), to = dir.string();
  for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
    message.replace(at, from.size(), to);
  return std::unexpected(Error(read.error().code(), message + " (nothing was written)"));
}

// Removes a bundle folder this run created, when the run fails: only while it holds the lock, and only
// when no manifest is there (a run that took the lock before this one may have written a good bundle
// into the folder this run's mkdir made).
struct CreatedFolder {
  fs::path dir;
  bool created = false;
  bool keep = false;
  ~CreatedFolder() {
    std::error_code ec;
    if (!created || keep || fs::exists(dir / kManifestName, ec) || ec) return;
    fs::remove_all(dir, ec);
  }
};

Expected<Assembled> assemble_locked(const fs::path& dir, const BundlePlan& plan, std::vector<CheckedTarget> targets,
                                    std::vector<CheckedWheel>& wheels, const std::vector<CheckedFile>& files) {
  Manifest manifest;
  std::error_code ec;
  if (fs::exists(dir / kManifestName, ec)) {
    PB_ASSIGN_OR_RETURN(manifest, read_manifest(dir));
  }
  for (const CheckedTarget& t : targets) {
    std::erase_if(manifest.targets, [&](const TargetEntry& old) { return old.name == t.entry.name; });
    manifest.targets.push_back(t.entry);
  }

  // Companion wheels: where each library goes (checked now), its hash once it is extracted.
  struct WheelPlacement {
    std::string target, rel;
    fs::path dest;
    const fetch::Wheel* wheel;
    const fetch::WheelMember* member;
    std::string from;
  };
  std::vector<WheelPlacement> wheel_files;
  Assembled out;
  for (size_t i = 0; i < plan.companion_wheels.size(); ++i) {
    const CompanionWheelSource& c = plan.companion_wheels[i];
    PB_ASSIGN_OR_RETURN(TargetEntry * entry, annotate(find_target(manifest, dir, c.target), "companion wheel " + c.wheel.string()));
    for (const fetch::WheelMember* m : wheels[i].libraries) {
      const std::string rel = "plugins/" + m->name;
      // A member named to escape (absolute, "..") is refused like a manifest entry would be.
      PB_ASSIGN_OR_RETURN(fs::path dest, annotate(resolve_in_bundle(dir, rel, "companion " + m->name),
                                                  "in wheel " + c.wheel.string()));
      set_companion(*entry, {rel, m->size, std::string(64, '0'), c.from});  // the hash once extracted
      wheel_files.push_back({c.target, rel, dest, &wheels[i].wheel, m, c.from});
    }
    out.companion_wheel_files.push_back(wheels[i].libraries.size());
  }
  struct FilePlacement {
    std::string target, rel;
    fs::path source, dest;
  };
  std::vector<FilePlacement> placed_files;
  for (size_t i = 0; i < plan.companion_files.size(); ++i) {
    const CompanionFileSource& c = plan.companion_files[i];
    std::vector<TargetEntry*> with;
    if (!c.target.empty()) {
      PB_ASSIGN_OR_RETURN(TargetEntry * entry, find_target(manifest, dir, c.target));
      with.push_back(entry);
    } else {
      for (TargetEntry& t : manifest.targets)
        if (t.platform == c.platform) with.push_back(&t);
    }
    std::string names;
    for (TargetEntry* entry : with) {
      const std::string rel = (fs::path(entry->file).parent_path() / c.file.filename()).string();
      PB_ASSIGN_OR_RETURN(fs::path dest, resolve_in_bundle(dir, rel, "companion " + c.file.filename().string()));
      set_companion(*entry, {rel, files[i].size, files[i].sha256, c.from});
      placed_files.push_back({entry->name, rel, c.file, dest});
      names += (names.empty() ? "" : ",") + entry->name;
    }
    out.companion_file_targets.push_back(names);
  }
  PB_RETURN_IF_ERROR(check_manifest(dir, manifest));

  // Writing. Plugin files go to new content-addressed paths; companion libraries are staged beside
  // where they go and renamed into place together; the manifest is replaced last.
  for (const CheckedTarget& t : targets) {
    const fs::path dest = dir / t.entry.file;
    // Stored once: a file already there with this content (same name under the same hash prefix, same
    // size and the same sha256) is reused; anything else there is replaced.
    if (auto id = file_identity(dest); id && id->size == t.entry.size) {
      if (auto sha = sha256_file(dest); sha && *sha == t.entry.sha256) continue;
    }
    PB_RETURN_IF_ERROR(place_file(t.source, dest));
  }
  std::vector<std::pair<AtomicFile, fs::path>> staged;
  for (const WheelPlacement& w : wheel_files) {
    fs::create_directories(w.dest.parent_path(), ec);
    if (ec) return make_error(Code::kPermissionDenied, "cannot create " + w.dest.parent_path().string() + ": " + ec.message());
    PB_ASSIGN_OR_RETURN(fetch::ExtractedMember x, w.wheel->extract(*w.member, w.dest.parent_path(), false));
    PB_ASSIGN_OR_RETURN(TargetEntry * entry, find_target(manifest, dir, w.target));
    set_companion(*entry, {w.rel, x.size, x.sha256, w.from});
    staged.emplace_back(std::move(x.file), w.dest);
  }
  for (auto& [file, dest] : staged) PB_RETURN_IF_ERROR(file.commit(dest, 0755));
  for (const FilePlacement& f : placed_files) PB_RETURN_IF_ERROR(place_file(f.source, f.dest));
  PB_RETURN_IF_ERROR(write_manifest(dir, manifest));
  out.manifest = std::move(manifest);
  return out;
}

}  // namespace

Expected<Assembled> assemble_bundle(const fs::path& dir, const BundlePlan& plan) noexcept {
  return no_throw("assembling a bundle", [&]() -> Expected<Assembled> {
    // 1. Everything that needs no bundle: the plan's own consistency, each plugin, each companion.
    std::set<std::string> names;
    std::vector<CheckedTarget> targets;
    for (const TargetSource& t : plan.targets) {
      if (!names.insert(t.name).second) return invalid_argument("target " + t.name + " is given twice");
      PB_ASSIGN_OR_RETURN(CheckedTarget c, check_target(t));
      targets.push_back(std::move(c));
    }
    std::vector<CheckedWheel> wheels;
    for (const CompanionWheelSource& c : plan.companion_wheels) {
      PB_ASSIGN_OR_RETURN(CheckedWheel w, check_companion_wheel(c));
      wheels.push_back(std::move(w));
    }
    std::vector<CheckedFile> files;
    for (const CompanionFileSource& c : plan.companion_files) {
      if (c.target.empty() == c.platform.empty())
        return invalid_argument("companion file " + c.file.string() + ": give a target or a platform, not both");
      PB_ASSIGN_OR_RETURN(CheckedFile f, check_companion_file(c));
      files.push_back(std::move(f));
    }

    // 2. The bundle, locked: its manifest with the plan applied, checked whole, then written.
    std::error_code ec;
    if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
    // mkdir itself says whether this run made the folder: of two runs racing to create it, one does.
    const bool created = !ec && fs::create_directory(dir, ec);
    if (ec) return make_error(Code::kPermissionDenied, "cannot create bundle folder " + dir.string() + ": " + ec.message());
    PB_ASSIGN_OR_RETURN(fetch::FileLock lock, annotate(fetch::FileLock::acquire(dir / kBundleLockName), "locking bundle " + dir.string()));
    CreatedFolder folder{dir, created};  // removed (on failure) before the lock is let go
    auto out = assemble_locked(dir, plan, std::move(targets), wheels, files);
    if (out) folder.keep = true;
    return out;
  });
}

Expected<Manifest> write_bundle(const fs::path& dir, const std::vector<TargetSource>& targets) {
  PB_ASSIGN_OR_RETURN(Assembled a, assemble_bundle(dir, BundlePlan{targets, {}, {}}));
  return std::move(a.manifest);
}

Expected<size_t> add_companion_wheel(const fs::path& dir, const std::string& target, const fs::path& wheel,
                                     const std::string& from) {
  PB_ASSIGN_OR_RETURN(Assembled a, assemble_bundle(dir, BundlePlan{{}, {{target, wheel, from}}, {}}));
  return a.companion_wheel_files.at(0);
}

Status add_companion_file(const fs::path& dir, const std::string& target, const fs::path& file,
                          const std::string& from) {
  PB_RETURN_IF_ERROR(assemble_bundle(dir, BundlePlan{{}, {}, {{target, "", file, from}}}));
  return ok();
}

}  // namespace plugboard::bundle
