// A plugin's own profiler in plugboard's trace: where a plugin has the PJRT profiler extension
// (abi/profiler.h; jax-cuda13-pjrt has it, the XLA CPU plugins do not), its profiler runs while a
// trace is recorded and what it saw (on the CUDA plugin: the kernels and copies on each GPU stream)
// becomes spans of the same trace.
//
//  - A plugin takes part once a client of it is made (Client::create calls client_made): its profiler
//    is created and started when a trace starts, or at once when the client is made while a trace
//    runs; it is stopped, its data collected and it is destroyed when the trace is asked to stop,
//    before recording ends.
//  - The data, a serialized XSpace (runtime/xspace.h), becomes one span per timed event on a track
//    per plane and line: "plugin /device:GPU:0 <line>" (category "plugin"), its stats as the span's
//    args. One more span, "plugin profiler" on the track "plugin profiler", covers the time it ran,
//    with the plugin's path, the counts, and the outcome.
//  - Times: an XLine's timestamp_ns is wall-clock time (ns since the Unix epoch, as the plugin read
//    it) and an event's offset_ps is from it. They are put on the trace's CLOCK_MONOTONIC through the
//    trace's clock pair: monotonic = wall - (clock_realtime_ns - clock_monotonic_ns), both read side by
//    side at the trace's start. A step of the wall clock during the trace shifts the plugin's spans
//    by that step: the pair is read again at the stop and the change reported (the summary span's
//    clock_offset_change_ns). Events that fall before the trace's start are counted, not kept.
//  - A profiler that fails (to be created, started, stopped, collected) or hands back bytes that are
//    not an XSpace never fails the trace: the summary span's "error" arg and the trace's notes say
//    so, naming the plugin.
//  - PLUGBOARD_PLUGIN_PROFILER=0 in the environment leaves every plugin's profiler off.
#pragma once

#include <memory>

#include "base/status.h"
#include "plugin/plugin.h"
#include "runtime/xspace.h"

namespace plugboard::plugin_profiler {

// Called once a client of `plugin` is made. Cheap for a plugin without the extension (one walk of
// its extension chain, the first time).
void client_made(const std::shared_ptr<const Plugin>& plugin) noexcept;

// Whether `plugin` has a profiler plugboard can drive: OK, or UNIMPLEMENTED naming the plugin (no
// extension, or one of an older layout).
Status available(const Plugin& plugin) noexcept;

// The options plugboard creates a profiler with: a serialized tensorflow.ProfileOptions (version 1,
// any device type, host tracer level 1, device tracer level 1).
std::string profile_options();

// Records `space` into the running trace as plugin spans (see above), with `pair` the trace's clock
// pair; returns how many events were recorded and how many fell before `trace_start_ns`.
struct Recorded {
  size_t events = 0, before_start = 0;
};
Recorded record_space(const xspace::Space& space, int64_t clock_monotonic_ns, int64_t clock_realtime_ns,
                      int64_t trace_start_ns) noexcept;

}  // namespace plugboard::plugin_profiler
