/// \file
/// Traces: where the time of a process goes, as spans in the Chrome trace-event JSON format (the one
/// Perfetto, ui.perfetto.dev, and chrome://tracing open).
///
/// \code
///   plugboard::trace::start();                       // everything below is recorded
///   ... boot, compile, copies, executions ...
///   auto trace = plugboard::trace::stop();           // what was recorded, as values
///   (void)trace->write("run.trace.json");            // open it in Perfetto
/// \endcode
///
/// What plugboard records (docs/traces.md): the boot's stages per candidate, compiles (the plugin's,
/// the compile cache's hits, misses and stores, precompiled loads), each execution (its launch on the
/// calling thread, the plugin's execute call, its time on the device's track from launch to ready, the
/// delivery of its completion), copies between host and device with their bytes, host callbacks on
/// the plugin's thread. Tracks: one per thread that recorded (named as the thread is), one per device
/// ("device 0 (cpu)"), and any named track a caller makes.
///
/// Cost. Off (the default), an instrumented site costs one relaxed atomic load and a branch: no clock
/// read, no allocation, no lock (4 instructions a span; 14 an execute_into). On, a span costs two
/// clock reads, its record (allocated with its arguments) and a push into the recording thread's own
/// buffer, under that buffer's own lock (no lock shared between threads; a span on a named track also
/// takes that track's lock for the few comparisons that pick its lane): about 100 ns (docs/traces.md). At most Options::max_spans are kept, the rest are counted as dropped (the trace's
/// "dropped_spans").
///
/// Clock: every time is nanoseconds of CLOCK_MONOTONIC (now()); start() also records one reading of
/// CLOCK_REALTIME beside one of CLOCK_MONOTONIC, which is what aligns traces of several processes or
/// machines (monotonic + (realtime_at_start - monotonic_at_start) is the wall-clock time).
///
/// Every function is noexcept and may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "plugboard/status.h"

#if !defined(PLUGBOARD_API)
#if defined(PLUGBOARD_BUILDING_LIBRARY)
#define PLUGBOARD_API __attribute__((visibility("default")))
#else
#define PLUGBOARD_API
#endif
#endif

namespace plugboard::trace {

/// Nanoseconds of CLOCK_MONOTONIC: the clock of every span, for a caller's own spans (record()).
PLUGBOARD_API int64_t now() noexcept;
/// True between start() and stop().
PLUGBOARD_API bool enabled() noexcept;

/// What start() records.
struct Options {
  /// Spans kept at most (a span is a few hundred bytes); later ones are counted, not kept.
  size_t max_spans = size_t{1} << 18;
  /// The process's name in the trace (a node's name, in a cluster); empty: "plugboard (pid N)".
  std::string process_name;
};

/// Starts recording. FAILED_PRECONDITION when a trace is being recorded already; INVALID_ARGUMENT for
/// max_spans 0.
PLUGBOARD_API Status start(const Options& options = {}) noexcept;

/// A span's argument: bytes, a device, an executable's name, a plugin's path, an outcome ...
using Value = std::variant<int64_t, double, std::string>;
/// One argument of a span (the JSON's "args").
struct Arg {
  std::string key;  ///< its name
  Value value;  ///< its value
};

/// Where a span is drawn. A thread's track (this_thread_track()), or a named track (named_track()),
/// whose spans need not nest: one that overlaps an earlier span of its track partly is drawn on a
/// lane of its own beside it ("device 0 (cpu) [2]").
using Track = uint32_t;
/// The calling thread's track: for a span that starts here and is recorded later elsewhere.
PLUGBOARD_API Track this_thread_track() noexcept;
/// The track of that name, made on first use and the same for the process's life ("device 0 (cpu)",
/// "elixir serving MyModel").
PLUGBOARD_API Track named_track(std::string_view name) noexcept;

/// Records a span from start_ns to end_ns (now() times) on `track`, from any thread: for spans that
/// start on one thread and end on another. Nothing when tracing is off or the span started before
/// start() (a span is kept only within the trace it began in).
PLUGBOARD_API void record(std::string_view name, std::string_view category, int64_t start_ns, int64_t end_ns,
                          Track track, std::span<const Arg> args = {}) noexcept;

// A recorded trace, as values.

/// One span of a recorded trace.
struct Span {
  std::string name;  ///< what it is ("compile", "execute", ...)
  std::string category;  ///< its kind (the JSON's "cat": "select", "compile", "execute", "device", ...)
  int64_t start_ns = 0;  ///< now() at its start
  int64_t end_ns = 0;  ///< now() at its end
  int tid = 0;  ///< the track, as the JSON's "tid"
  std::vector<Arg> args;  ///< its arguments
};

/// The name of one track of a recorded trace.
struct TrackName {
  int tid = 0;  ///< the track, as Span::tid
  std::string name;  ///< the thread's name, or the named track's ("device 0 (cpu)")
};

/// A recorded trace: what stop() hands back.
struct Trace {
  std::string process_name;  ///< Options::process_name, or "plugboard (pid N)"
  int pid = 0;  ///< the process's id
  /// One reading of each clock at start(), for aligning traces across processes and machines.
  int64_t clock_monotonic_ns = 0;
  int64_t clock_realtime_ns = 0;  ///< CLOCK_REALTIME beside clock_monotonic_ns
  int64_t started_ns = 0;  ///< now() at start()
  int64_t stopped_ns = 0;  ///< now() at stop()
  size_t max_spans = 0;  ///< Options::max_spans
  uint64_t dropped_spans = 0;  ///< spans past max_spans, not kept
  /// What went wrong while recording that is not a span of the program: a plugin's own profiler that
  /// could not be started or collected ("plugin profiler of PATH: ..."). Also under "otherData".
  std::vector<std::string> notes;
  std::vector<TrackName> tracks;  ///< the names of the tracks the spans are on
  std::vector<Span> spans;  ///< in no particular order

  /// The Chrome trace-event JSON document: "X" (complete) events, times in microseconds (ts, dur,
  /// fractional), pid and tid tracks named by "M" (metadata) events, and under "otherData" the clock
  /// pair, the span count, dropped_spans and the notes.
  PLUGBOARD_API Expected<std::string> to_json() const noexcept;
  /// to_json() written to `path`, whole or not at all.
  PLUGBOARD_API Status write(const std::filesystem::path& path) const noexcept;
};

/// Stops recording and hands back what was recorded. FAILED_PRECONDITION when no trace was started.
/// A span that started before stop() and ends after it is not in the trace.
PLUGBOARD_API Expected<Trace> stop() noexcept;

}  // namespace plugboard::trace
