// fetch(): for each NAME==VERSION, get the wheel (a folder of wheels, or pip), hash it and hold it to
// plugboard.lock, reuse or extract the plugin into the cache, then record what was fetched if asked.
#include "fetch/fetch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/cache_home.h"
#include "base/environment.h"
#include "base/no_throw.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "fetch/cache.h"
#include "fetch/known_packages.h"
#include "fetch/package_spec.h"
#include "fetch/pip.h"
#include "fetch/plugin_member.h"
#include "fetch/progress.h"
#include "base/atomic_file.h"
#include "base/temp_dir.h"
#include "fetch/wheel.h"

namespace plugboard::fetch {
namespace {

namespace fs = std::filesystem;

struct Context {
  const FetchOptions& options;
  const fs::path& lock_path;
  const LockFile& lock;
  const Cache& cache;
};

std::unexpected<Error> lock_mismatch(const PackageSpec& spec, const std::string& what, const fs::path& lock_path,
                                     const std::string& expected, const std::string& actual, Code code) {
  return make_error(code, spec.to_string() + ": " + what + " does not match " + lock_path.string() + ": the lock has " +
                              expected + ", fetched " + actual);
}

// --offline --from DIR: the wheel of NAME==VERSION by its file name (the locked one if several).
Expected<fs::path> find_offline_wheel(const PackageSpec& spec, const fs::path& dir, const LockEntry* locked) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!wheel_is_for(name, spec)) continue;
    if (locked && name == locked->wheel) return e.path();
    found.push_back(e.path());
  }
  if (ec) return make_error(Code::kNotFound, "cannot list wheel folder " + dir.string() + ": " + ec.message());
  if (found.empty()) {
    std::string pattern = normalize_package_name(spec.name);
    for (char& c : pattern) c = c == '-' ? '_' : c;
    return make_error(Code::kNotFound, "no wheel of " + spec.to_string() + " in " + dir.string() + " (looked for " +
                                           pattern + "-" + spec.version + "-*.whl)");
  }
  if (found.size() > 1) {
    std::string names;
    for (const fs::path& p : found) names += (names.empty() ? "" : ", ") + p.filename().string();
    return make_error(Code::kFailedPrecondition, "several wheels of " + spec.to_string() + " in " + dir.string() +
                                                     " (" + names + "): lock one, or keep only the one to use");
  }
  return found.front();
}

// pip download into <cache>/wheels/tmp-XXXXXX, then moved to <cache>/wheels/. A wheel the lock names
// that is already there is used without pip.
Expected<fs::path> download_wheel(const PackageSpec& spec, const Context& ctx, const LockEntry* locked) {
  if (locked) {
    const fs::path cached = ctx.cache.wheels_dir() / locked->wheel;
    std::error_code ec;
    if (fs::is_regular_file(cached, ec)) return cached;
  }
  PB_ASSIGN_OR_RETURN(TempDir tmp, TempDir::create(ctx.cache.wheels_dir()));
  const std::optional<std::string> pinned = locked ? std::optional<std::string>(locked->wheel_sha256) : std::nullopt;
  PB_ASSIGN_OR_RETURN(fs::path downloaded, pip_download(spec, pinned, ctx.options, tmp.path()));
  const fs::path destination = ctx.cache.wheels_dir() / downloaded.filename();
  PB_RETURN_IF_ERROR(move_file_durably(downloaded, destination));
  return destination;
}

// Hashed through a descriptor of a regular file: a FIFO or a device named like a wheel is refused.
Expected<std::string> hash_wheel(const fs::path& wheel, bool progress) {
  auto fd = open_regular_file(wheel);
  if (!fd) return std::unexpected(std::move(fd).error().annotate("hashing wheel " + wheel.string()));
  struct stat st {};
  const uint64_t size = ::fstat(fd->get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  Progress bar(progress, "hashing " + wheel.filename().string(), size);
  return sha256_fd(fd->get(), wheel, [&bar](uint64_t done, uint64_t) { bar.update(done); });
}

Expected<FetchedPlugin> fetch_one(const PackageSpec& spec, const Context& ctx) {
  const KnownPackage* known = find_known_package(spec.name);
  const LockEntry* locked = ctx.lock.find(spec.name, spec.version);
  if (locked && locked->companion)
    return make_error(Code::kFailedPrecondition, spec.to_string() + " is locked in " + ctx.lock_path.string() +
                                                     " as a companion wheel, not as a plugin");

  fs::path wheel_path;
  if (ctx.options.offline_from) {
    PB_ASSIGN_OR_RETURN(wheel_path, find_offline_wheel(spec, *ctx.options.offline_from, locked));
  } else {
    PB_ASSIGN_OR_RETURN(wheel_path, download_wheel(spec, ctx, locked));
  }
  PB_ASSIGN_OR_RETURN(std::string wheel_sha256, hash_wheel(wheel_path, ctx.options.progress));
  if (locked && wheel_sha256 != locked->wheel_sha256)
    return lock_mismatch(spec, "the sha256 of wheel " + wheel_path.string(), ctx.lock_path, locked->wheel_sha256,
                         wheel_sha256, Code::kDataLoss);

  FetchedPlugin out;
  out.spec = spec;
  out.wheel = wheel_path.filename().string();
  out.wheel_sha256 = wheel_sha256;
  out.platform = known ? known->platform : "unknown";
  out.probe = known ? known->probe : "none";
  out.priority = known ? known->priority : 0;

  // One extraction per wheel at a time; whoever waited finds the other's result in the index.
  PB_ASSIGN_OR_RETURN(FileLock entry_lock, ctx.cache.lock("wheel-" + wheel_sha256));
  PB_ASSIGN_OR_RETURN(const std::optional<CachedPlugin> cached, ctx.cache.lookup(wheel_sha256));
  std::string member = known ? known->plugin_path : locked ? locked->plugin_path : cached ? cached->plugin_path : "";
  if (locked && !member.empty() && member != locked->plugin_path)
    return lock_mismatch(spec, "the plugin's path in the wheel", ctx.lock_path, locked->plugin_path, member,
                         Code::kFailedPrecondition);

  CachedPlugin placed;
  if (cached && cached->plugin_path == member) {
    placed = *cached;
    out.from_cache = true;
  } else {
    PB_ASSIGN_OR_RETURN(Wheel wheel, Wheel::open(wheel_path));
    PluginMember found;
    if (!member.empty() && !known) {
      found.member = wheel.find(member);
      if (!found.member)
        return make_error(Code::kNotFound, spec.to_string() + ": " + ctx.lock_path.string() + " says the plugin is " +
                                               member + ", but wheel " + wheel_path.string() + " has no such member");
    } else {
      PB_ASSIGN_OR_RETURN(found, find_plugin_member(wheel, spec, known, ctx.cache.plugins_dir(), ctx.options.progress));
    }
    member = found.member->name;
    std::optional<ExtractedMember> extracted = std::move(found.extracted);
    if (!extracted) {
      PB_ASSIGN_OR_RETURN(extracted, wheel.extract(*found.member, ctx.cache.plugins_dir(), ctx.options.progress));
    }
    // Checked before anything is placed in the cache: a PJRT plugin, with the hash the lock pins.
    PB_RETURN_IF_ERROR(check_pjrt_plugin_file(extracted->file.path(), spec.to_string() + ": member " + member +
                                                                          " of wheel " + wheel_path.string()));
    if (locked && extracted->sha256 != locked->plugin_sha256)
      return lock_mismatch(spec, "the sha256 of plugin " + member, ctx.lock_path, locked->plugin_sha256,
                           extracted->sha256, Code::kDataLoss);
    PB_ASSIGN_OR_RETURN(placed, ctx.cache.store(std::move(*extracted), member, wheel_sha256));
  }
  if (locked && placed.plugin_sha256 != locked->plugin_sha256)
    return lock_mismatch(spec, "the sha256 of plugin " + member, ctx.lock_path, locked->plugin_sha256,
                         placed.plugin_sha256, Code::kDataLoss);

  out.plugin_path = placed.plugin_path;
  out.plugin_sha256 = placed.plugin_sha256;
  out.size = placed.size;
  out.file = placed.file;
  return out;
}

// Adds or replaces the entries' packages, under a lock so parallel fetches do not lose entries.
Status update_lock(const fs::path& lock_path, const Cache& cache, const std::vector<LockEntry>& entries) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(lock_path, ec);
  const std::string key = absolute.string();
  PB_ASSIGN_OR_RETURN(FileLock guard, cache.lock("lockfile-" + sha256_hex(std::as_bytes(std::span(key.data(), key.size())))));
  PB_ASSIGN_OR_RETURN(LockFile lock, read_lock(lock_path));
  for (const LockEntry& entry : entries) {
    std::erase_if(lock.entries, [&](const LockEntry& e) { return e.package == entry.package; });
    lock.entries.push_back(entry);
  }
  return write_lock(lock_path, lock);
}

}  // namespace

fs::path default_cache_dir() { return plugboard_cache_home(); }

Expected<std::vector<FetchedPlugin>> fetch(std::span<const PackageSpec> packages, const FetchOptions& options) noexcept {
  return no_throw("fetching plugins", [&]() -> Expected<std::vector<FetchedPlugin>> {
    if (const auto& table = embedded_known_packages(); !table)
      return make_error(Code::kInternal, "the embedded table of known packages is malformed: " + table.error().to_string());
    if (packages.empty()) return invalid_argument("no package to fetch: give NAME==VERSION");
    for (const PackageSpec& spec : packages) PB_RETURN_IF_ERROR(annotate(check_package_spec(spec), "fetch()"));
    if (options.offline_from) {
      std::error_code ec;
      if (!fs::is_directory(*options.offline_from, ec))
        return make_error(Code::kNotFound, "wheel folder " + options.offline_from->string() + " (--from) is not a folder");
    }
    const fs::path lock_path = options.lock_path.empty() ? fs::path("plugboard.lock") : options.lock_path;
    PB_ASSIGN_OR_RETURN(const LockFile lock, read_lock(lock_path));
    PB_ASSIGN_OR_RETURN(const Cache cache, Cache::open(options.cache_dir.empty() ? default_cache_dir() : options.cache_dir));

    const Context ctx{options, lock_path, lock, cache};
    std::vector<FetchedPlugin> fetched;
    for (const PackageSpec& spec : packages) {
      auto one = fetch_one(spec, ctx);
      if (!one) return std::unexpected(std::move(one).error().annotate("fetching " + spec.to_string()));
      fetched.push_back(std::move(*one));
    }
    if (options.write_lock) {
      std::vector<LockEntry> entries;
      for (const FetchedPlugin& f : fetched)
        entries.push_back({normalize_package_name(f.spec.name), f.spec.version, f.wheel, f.wheel_sha256, f.plugin_path,
                           f.plugin_sha256, false});
      PB_RETURN_IF_ERROR(update_lock(lock_path, cache, entries));
    }
    return fetched;
  });
}

}  // namespace plugboard::fetch

namespace plugboard::fetch {

Expected<FetchedWheel> fetch_wheel(const PackageSpec& spec, const FetchOptions& options) noexcept {
  return no_throw("fetching a wheel", [&]() -> Expected<FetchedWheel> {
    PB_RETURN_IF_ERROR(annotate(check_package_spec(spec), "fetch_wheel()"));
    const fs::path lock_path = options.lock_path.empty() ? fs::path("plugboard.lock") : options.lock_path;
    PB_ASSIGN_OR_RETURN(const LockFile lock, read_lock(lock_path));
    PB_ASSIGN_OR_RETURN(const Cache cache, Cache::open(options.cache_dir.empty() ? default_cache_dir() : options.cache_dir));
    const Context ctx{options, lock_path, lock, cache};
    const std::string what = "fetching " + spec.to_string();
    const LockEntry* locked = lock.find(spec.name, spec.version);
    if (locked && !locked->companion)
      return make_error(Code::kFailedPrecondition, what + ": it is locked in " + lock_path.string() +
                                                       " as a plugin, not as a companion wheel");
    FetchedWheel out{spec, {}, {}};
    if (options.offline_from) {
      PB_ASSIGN_OR_RETURN(out.wheel, annotate(find_offline_wheel(spec, *options.offline_from, locked), what));
    } else {
      PB_ASSIGN_OR_RETURN(out.wheel, annotate(download_wheel(spec, ctx, locked), what));
    }
    PB_ASSIGN_OR_RETURN(out.wheel_sha256, annotate(hash_wheel(out.wheel, options.progress), what));
    if (locked && out.wheel_sha256 != locked->wheel_sha256)
      return std::unexpected(lock_mismatch(spec, "the sha256 of wheel " + out.wheel.string(), lock_path,
                                           locked->wheel_sha256, out.wheel_sha256, Code::kDataLoss)
                                 .error()
                                 .annotate(what));
    if (options.write_lock)
      PB_RETURN_IF_ERROR(update_lock(lock_path, cache, {{normalize_package_name(spec.name), spec.version,
                                                         out.wheel.filename().string(), out.wheel_sha256, "", "", true}}));
    return out;
  });
}

}  // namespace plugboard::fetch
