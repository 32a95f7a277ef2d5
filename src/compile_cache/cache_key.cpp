#include "compile_cache/cache_key.h"

#include <algorithm>
#include <optional>

#include "base/environment.h"
#include "base/no_throw.h"
#include "platforms/registry.h"
#include "base/sha256.h"
#include "compile_cache/host_cpu.h"
#include "compile_cache/plugin_fingerprint.h"

namespace plugboard::compile_cache {
namespace {

// Each part as "<length>:<bytes>;", so that no two different lists of parts encode alike.
void append_part(std::string& out, std::string_view part) {
  out += std::to_string(part.size());
  out += ':';
  out += part;
  out += ';';
}

}  // namespace

Expected<Target> target_of(const Client& client, size_t devices_used, std::optional<std::string> sha) noexcept {
  return no_throw("identifying a client for the compile cache", [&]() -> Expected<Target> {
    Target t;
    if (sha) {
      t.plugin_sha256 = std::move(*sha);
    } else {
      PB_ASSIGN_OR_RETURN(t.plugin_sha256, plugin_sha256(client.plugin()));
    }
    t.platform_name = client.platform_name();
    t.platform_version = client.platform_version();
    const auto& devices = client.devices();
    for (size_t i = 0; i < devices.size() && i < std::max<size_t>(devices_used, 1); ++i) t.device_kinds.push_back(devices[i].kind);
    const platforms::PlatformTraits* platform = platforms::platform_for_client(t.platform_name);
    if (platform && platform->name == "cpu") {
      PB_ASSIGN_OR_RETURN(t.host_cpu, host_cpu_features());
    }
    if (auto flags = environment_override("XLA_FLAGS")) t.xla_flags = *flags;
    return t;
  });
}

Expected<std::string> host_cpu_features() {
  PB_ASSIGN_OR_RETURN(HostCpu cpu, this_host_cpu());
  return cpu.digest;
}

std::string join_device_kinds(const std::vector<std::string>& kinds) {
  std::string out;
  for (const std::string& k : kinds) out += (out.empty() ? "" : ",") + k;
  return out;
}

std::string cache_key(const Target& target, std::string_view serialized_options, std::string_view program_bytes) {
  std::string encoded;
  encoded.reserve(program_bytes.size() + serialized_options.size() + 256);
  append_part(encoded, "plugboard compile-cache key");
  append_part(encoded, std::to_string(kFormatVersion));
  append_part(encoded, target.plugin_sha256);
  append_part(encoded, target.platform_name);
  append_part(encoded, std::to_string(target.device_kinds.size()));
  for (const std::string& kind : target.device_kinds) append_part(encoded, kind);
  append_part(encoded, target.host_cpu);
  append_part(encoded, target.xla_flags);
  append_part(encoded, serialized_options);
  append_part(encoded, program_bytes);
  return sha256_hex(std::as_bytes(std::span(encoded.data(), encoded.size())));
}

}  // namespace plugboard::compile_cache
