// What identifies a plugin build for the compile cache: the sha256 of its file. An executable
// serialized by one build is only ever loaded by that same build.
#pragma once

#include <string>

#include "base/status.h"
#include "plugin/plugin.h"

namespace plugboard::compile_cache {

// The sha256 of the plugin's file, cheapest source first: what verification hashed in this process
// (a bundle's manifest), this process's earlier answer, a stamp (base/hash_stamp.h) that records the
// file's current identity, and only then a hash of the file (remembered in a stamp). Each source is
// used only while the file still has the identity it had when hashed.
Expected<std::string> plugin_sha256(const Plugin& plugin) noexcept;

}  // namespace plugboard::compile_cache
