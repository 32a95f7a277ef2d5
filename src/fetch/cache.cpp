// Cache: folder layout, per-entry locks, the wheel -> plugin index and its stamps.
#include "fetch/cache.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "fetch/temp_file.h"

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

std::optional<CachedPlugin> Cache::lookup(std::string_view wheel_sha256) const {
  std::ifstream in(index_file(wheel_sha256));
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("schema", 0) != kIndexSchema) return std::nullopt;
  const std::string member = j.value("plugin_path", "");
  const std::string sha = j.value("plugin_sha256", "");
  const uint64_t size = j.value("size", uint64_t{0});
  const int64_t stamp = j.value("mtime_ns", int64_t{-1});
  if (member.empty() || !is_sha256_hex(sha)) return std::nullopt;
  const std::filesystem::path file = plugins_dir() / sha / std::filesystem::path(member).filename();
  uint64_t actual_size = 0;
  const auto actual_stamp = mtime_ns(file, &actual_size);
  if (!actual_stamp || *actual_stamp != stamp || actual_size != size) return std::nullopt;
  return CachedPlugin{member, sha, size, file};
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
  PB_ASSIGN_OR_RETURN(TempFile tmp, TempFile::create(root_ / "index"));
  PB_RETURN_IF_ERROR(tmp.write_all(record.dump(2) + "\n"));
  PB_RETURN_IF_ERROR(tmp.commit(index_file(wheel_sha256), 0644));
  return CachedPlugin{std::string(plugin_path), plugin.sha256, plugin.size, file};
}

}  // namespace plugboard::fetch
