// Cache: folder layout, per-entry locks, the wheel -> plugin index and its stamps.
#include "fetch/cache.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "base/regular_file.h"
#include "base/sha256.h"
#include "base/strict_json.h"
#include "base/atomic_file.h"

namespace plugboard::fetch {
namespace {

constexpr int kIndexSchema = 1;

std::optional<int64_t> mtime_ns(const std::filesystem::path& path, uint64_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  *size = static_cast<uint64_t>(st.st_size);
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

Expected<Cache> Cache::open(const std::filesystem::path& root) {
  for (const char* sub : {"plugins", "wheels", "index", "locks"}) {
    std::error_code ec;
    std::filesystem::create_directories(root / sub, ec);
    if (ec) return make_error(Code::kPermissionDenied, "cannot create cache folder " + (root / sub).string() + ": " + ec.message());
  }
  return Cache(root);
}

Expected<FileLock> Cache::lock(std::string_view key) const {
  return FileLock::acquire(root_ / "locks" / (std::string(key) + ".lock"));
}

std::filesystem::path Cache::index_file(std::string_view wheel_sha256) const {
  return root_ / "index" / (std::string(wheel_sha256) + ".json");
}

Expected<std::optional<CachedPlugin>> Cache::lookup(std::string_view wheel_sha256) const {
  const std::filesystem::path path = index_file(wheel_sha256);
  auto text = read_regular_file(path, kMaxManifestBytes);
  if (!text && text.error().code() == Code::kNotFound) return std::nullopt;
  auto corrupt = [&](const Error& e) {
    return make_error(Code::kDataLoss, "plugin cache index " + path.string() + " is damaged (remove it to extract again): " +
                                           e.to_string());
  };
  if (!text) return corrupt(text.error());
  auto j = strict_json::parse(*text, path.string());
  if (!j) return corrupt(j.error());
  auto schema = strict_json::get_int(*j, "schema", "");
  if (!schema) return corrupt(schema.error());
  if (*schema != kIndexSchema) return std::nullopt;  // written by another plugboard: extract again
  auto member = strict_json::get_string(*j, "plugin_path", "");
  auto sha = strict_json::get_string(*j, "plugin_sha256", "");
  auto size = strict_json::get_uint(*j, "size", "");
  auto stamp = strict_json::get_int(*j, "mtime_ns", "");
  if (!member) return corrupt(member.error());
  if (!sha) return corrupt(sha.error());
  if (!size) return corrupt(size.error());
  if (!stamp) return corrupt(stamp.error());
  if (member->empty() || !is_sha256_hex(*sha))
    return corrupt(Error(Code::kInvalidArgument, "plugin_path is empty or plugin_sha256 is not a sha256"));
  const std::filesystem::path file = plugins_dir() / *sha / std::filesystem::path(*member).filename();
  uint64_t actual_size = 0;
  const auto actual_stamp = mtime_ns(file, &actual_size);
  if (!actual_stamp || *actual_stamp != *stamp || actual_size != *size) return std::nullopt;
  return CachedPlugin{*member, *sha, *size, file};
}

Expected<CachedPlugin> Cache::store(ExtractedMember plugin, std::string_view plugin_path,
                                   std::string_view wheel_sha256) const {
  const std::filesystem::path dir = plugins_dir() / plugin.sha256;
  const std::filesystem::path file = dir / std::filesystem::path(plugin_path).filename();
  int64_t stamp = 0;
  {
    // Two wheels may hold the same plugin: placing it is its own entry.
    PB_ASSIGN_OR_RETURN(FileLock entry_lock, lock("plugin-" + plugin.sha256));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return make_error(Code::kPermissionDenied, "cannot create cache folder " + dir.string() + ": " + ec.message());
    PB_RETURN_IF_ERROR(plugin.file.commit(file, 0755));
    uint64_t size = 0;
    const auto placed = mtime_ns(file, &size);
    if (!placed || size != plugin.size)
      return make_error(Code::kDataLoss, file.string() + " changed while it was being placed in the cache");
    stamp = *placed;
  }
  const nlohmann::json record = {{"schema", kIndexSchema},
                                 {"plugin_path", std::string(plugin_path)},
                                 {"plugin_sha256", plugin.sha256},
                                 {"size", plugin.size},
                                 {"mtime_ns", stamp}};
  PB_ASSIGN_OR_RETURN(AtomicFile tmp, AtomicFile::create(root_ / "index"));
  PB_RETURN_IF_ERROR(tmp.write_all(record.dump(2) + "\n"));
  PB_RETURN_IF_ERROR(tmp.commit(index_file(wheel_sha256), 0644));
  return CachedPlugin{std::string(plugin_path), plugin.sha256, plugin.size, file};
}

}  // namespace plugboard::fetch
