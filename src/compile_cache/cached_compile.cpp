#include "compile_cache/cached_compile.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/clock.h"
#include "base/no_throw.h"
#include "base/regular_file.h"
#include "base/sha256.h"
#include "base/trace.h"
#include "compile_cache/cache_key.h"
#include "compile_cache/description_text.h"
#include "compile_cache/entry.h"

namespace plugboard::compile_cache {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The bundle's file for `key`, if any.
const PrecompiledFile* precompiled_for(const std::vector<PrecompiledFile>& files, const std::string& key) {
  for (const PrecompiledFile& f : files)
    if (f.path.stem().string() == key) return &f;
  return nullptr;
}

}  // namespace

Expected<Entry> read_precompiled(const PrecompiledFile& f) noexcept {
  return no_throw("reading a precompiled program", [&]() -> Expected<Entry> {
    const std::string key = f.path.stem().string();
    const std::string where = "precompiled entry " + f.path.string();
    auto bytes = read_regular_file(f.path, kMaxEntryBytes, OpenOptions{.no_follow = true});
    if (!bytes) return std::unexpected(std::move(bytes).error());
    if (bytes->size() != f.size)
      return make_error(Code::kDataLoss, where + " is " + std::to_string(bytes->size()) + " bytes, the manifest says " +
                                             std::to_string(f.size) + ": refused");
    if (const std::string sha = sha256_hex(std::as_bytes(std::span(bytes->data(), bytes->size()))); sha != f.sha256)
      return make_error(Code::kDataLoss, where + " has sha256 " + sha + ", the manifest says " + f.sha256 +
                                             ": the file was changed; refused");
    return decode_entry(*bytes, key, where);
  });
}

Entry make_entry(const std::string& key, const Target& target, const std::string& program, const std::string& plugin,
                 std::string payload, const std::optional<Description>& description) {
  Entry entry{key,
              {{"program", program},
               {"plugin", plugin},
               {"plugin_sha256", target.plugin_sha256},
               {"platform", target.platform_name + (target.platform_version.empty() ? "" : " " + target.platform_version)},
               {"device_kinds", join_device_kinds(target.device_kinds)},
               {"created", utc_now()}},
              std::move(payload)};
  if (description) put_description(*description, entry.metadata);
  return entry;
}

Expected<CompileSources> default_sources(std::vector<PrecompiledFile> precompiled) noexcept {
  return no_throw("setting up the compile caches", [&]() -> Expected<CompileSources> {
    CompileSources sources;
    sources.precompiled = std::move(precompiled);
    PB_ASSIGN_OR_RETURN(const DiskCacheSettings settings, settings_from_environment());
    if (settings.enabled) sources.cache.emplace(settings.dir, settings.max_bytes);
    return sources;
  });
}

const char* origin_id(Origin origin) {
  switch (origin) {
    case Origin::kCompiled: return "compiled";
    case Origin::kCompileCache: return "compile_cache";
    case Origin::kPrecompiled: return "precompiled";
  }
  return "compiled";
}

std::string describe(Origin origin, double ms) {
  char ms_text[32];
  std::snprintf(ms_text, sizeof(ms_text), "%.*f ms", ms < 10 ? 2 : 1, ms);
  switch (origin) {
    case Origin::kCompiled: return std::string("compiled in ") + ms_text;
    case Origin::kCompileCache: return std::string("compile-cache hit (loaded in ") + ms_text + ")";
    case Origin::kPrecompiled: return std::string("precompiled in the bundle (loaded in ") + ms_text + ")";
  }
  return {};
}

Expected<CompileOutcome> compile(const Client& client, const Program& program, const CompileOptions& options,
                                 const CompileSources& sources) noexcept {
  return no_throw("compiling through the compile cache", [&]() -> Expected<CompileOutcome> {
    trace::Scope span("compile", "compile");
    if (span) span.arg("program", program.name()).arg("plugin", client.plugin().path().string());
    CompileOutcome out;
    auto compile_here = [&]() -> Status {
      const auto start = Clock::now();
      PB_ASSIGN_OR_RETURN(out.executable, client.compile(program, options));
      out.ms = ms_since(start);
      out.origin = Origin::kCompiled;
      return ok();
    };
    if (sources.precompiled.empty() && !sources.cache) {
      PB_RETURN_IF_ERROR(compile_here());
      return out;
    }
    auto target = target_of(client, static_cast<size_t>(options.num_replicas * options.num_partitions));
    if (!target) {
      out.notes.push_back("compile cache not used: " + target.error().to_string());
      PB_RETURN_IF_ERROR(compile_here());
      return out;
    }
    out.key = cache_key(*target, options.serialize(), program.bytes());

    // Loads an entry's executable; false (with a note) when the plugin refuses it.
    auto load = [&](Entry entry, const std::filesystem::path& path, Origin origin, auto start) {
      const std::optional<Description> known = get_description(entry.metadata);
      auto exe = client.load_serialized(entry.payload, options.portable, "compile-cache entry " + path.string(),
                                        known ? &*known : nullptr);
      if (!exe) {
        out.notes.push_back("entry " + path.string() + " not used: " + exe.error().to_string());
        return false;
      }
      out.executable = std::move(*exe);
      out.origin = origin;
      out.entry = path;
      out.ms = ms_since(start);
      return true;
    };

    if (const PrecompiledFile* file = precompiled_for(sources.precompiled, out.key)) {
      trace::Scope step("precompiled_load", "compile");
      const auto start = Clock::now();
      auto entry = read_precompiled(*file);
      if (!entry) out.notes.push_back(entry.error().to_string());
      const bool loaded = entry && load(std::move(*entry), file->path, Origin::kPrecompiled, start);
      step.arg("outcome", loaded ? "loaded" : "refused");
      if (loaded) return out;
    }
    if (sources.cache) {
      trace::Scope step("compile_cache_lookup", "compile");
      const auto start = Clock::now();
      DiskCache::Found found = sources.cache->find(out.key);
      if (found.problem) out.notes.push_back("compile cache: " + *found.problem);
      step.arg("outcome", found.entry ? "hit" : "miss");
      if (found.entry) {
        step.arg("bytes", static_cast<int64_t>(found.entry->payload.size()));
        if (load(std::move(*found.entry), sources.cache->entry_path(out.key), Origin::kCompileCache, start)) return out;
        step.arg("refused", 1);
        sources.cache->remove(out.key);
      }
    }

    PB_RETURN_IF_ERROR(compile_here());
    if (!sources.cache) return out;
    trace::Scope store("compile_cache_store", "compile");
    auto serialized = out.executable->serialize();
    if (serialized) store.arg("bytes", static_cast<int64_t>(serialized->size()));
    if (!serialized) {
      out.notes.push_back("not stored in the compile cache: " + serialized.error().to_string());
      return out;
    }
    const Entry entry = make_entry(out.key, *target, program.name(), client.plugin().path().string(),
                                   std::move(*serialized), out.executable->description());
    if (auto stored = sources.cache->store(entry); !stored)
      out.notes.push_back("not stored in the compile cache: " + stored.error().to_string());
    else
      out.entry = sources.cache->entry_path(out.key);
    return out;
  });
}

}  // namespace plugboard::compile_cache
