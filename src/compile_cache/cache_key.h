// The key of a compiled program: everything that decides what the plugin would compile it into.
// Two compilations share a key only when the plugin file (sha256), its platform name, the client's
// device kinds, the serialized compile options and the program bytes are all the same;
// kFormatVersion changes whenever the key or the entry format does.
//
// The platform version is not part of the key: it is a property of the plugin build, which the
// sha256 already pins, and a program precompiled for a GPU on a machine without one (runtime/
// topology.h) cannot know the string the client will report there. It is kept in the entry's
// metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/client.h"

namespace plugboard::compile_cache {

inline constexpr uint32_t kFormatVersion = 2;

// What the key says about the plugin and client side.
struct Target {
  std::string plugin_sha256;
  std::string platform_name;
  std::string platform_version;  // for the entry's metadata only
  std::vector<std::string> device_kinds;  // the client's addressable devices', in order
  // For a CPU platform, the host processor's features (host_cpu_features()): XLA's CPU executables
  // are compiled for the machine that compiles them, so an entry made on another processor is
  // never loaded here (it could use instructions this one lacks). Empty for other platforms.
  std::string host_cpu;
  // XLA_FLAGS as the process has it: XLA reads it when it compiles (fast-math, ISA limits, ...).
  std::string xla_flags;
};

// A digest of this machine's processor model and feature flags (host_cpu.h: this_host_cpu().digest);
// UNAVAILABLE when none is found, and then the cache is not used for CPU executables.
Expected<std::string> host_cpu_features();

// The client's plugin and devices (the plugin's sha256 from plugin_fingerprint.h, unless the caller
// knows it: a bundle's manifest). `devices_used`: how many of the client's devices the executable
// runs on (num_replicas * num_partitions), whose kinds the key holds.
Expected<Target> target_of(const Client& client, size_t devices_used,
                           std::optional<std::string> plugin_sha256 = std::nullopt) noexcept;

// "NVIDIA H200,NVIDIA H200": the device kinds as entries' metadata records them.
std::string join_device_kinds(const std::vector<std::string>& kinds);

// The key as 64 lowercase hex digits: the sha256 of a length-prefixed encoding of every part.
std::string cache_key(const Target& target, std::string_view serialized_options, std::string_view program_bytes);

}  // namespace plugboard::compile_cache
