// The PJRT create options plugboard knows, checked before a plugin sees them.
//
// A plugin takes its create options on trust: XLA's CPU plugin 0.106 dies (SIGSEGV) on
// cpu_device_count -1, ±2^31, "4" or 4.5 and aborts on `true`; every CPU plugin makes a client
// without devices for 0; 0.81 throws ("Unexpected index") on a value of another type. So each option
// plugboard knows is checked for its type and range here, for every caller (the facade, the CLI, the
// bindings), and refused as a value naming the option, the value, what is allowed and the plugin.
// Options plugboard does not know go to the plugin as given.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "plugin/plugin.h"

namespace plugboard {

// ok, or INVALID_ARGUMENT for the first known option whose value has the wrong type or is out of
// range: "create option cpu_device_count = -1 (an integer) for <plugin>: must be an integer in 1..4096".
Status check_create_options(const std::vector<NamedValue>& options, const std::string& plugin);

// "cpu_device_count = 4, platform_name = \"cuda\"" for a plugin's refusal; "no create options" when empty.
std::string describe_create_options(const std::vector<NamedValue>& options);

}  // namespace plugboard
