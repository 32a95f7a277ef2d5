#include "runtime/plugin_profiler.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "abi/api.h"
#include "abi/profiler.h"
#include "base/no_throw.h"
#include "base/trace.h"
#include "runtime/protobuf_wire.h"

namespace plugboard::plugin_profiler {
namespace {

constexpr size_t kMaxProfileBytes = size_t{1} << 30;  // what plugboard reads of one collection
constexpr size_t kMaxStatsPerEvent = 16;

bool turned_off() {
  const char* v = std::getenv("PLUGBOARD_PLUGIN_PROFILER");
  return v && std::string_view(v) == "0";
}

// CLOCK_REALTIME - CLOCK_MONOTONIC now, from two readings side by side.
int64_t clock_offset_now() {
  timespec m{}, r{};
  clock_gettime(CLOCK_MONOTONIC, &m);
  clock_gettime(CLOCK_REALTIME, &r);
  return (int64_t{r.tv_sec} - int64_t{m.tv_sec}) * 1'000'000'000 + (r.tv_nsec - m.tv_nsec);
}

// One plugin that has the extension, and its profiler while one runs.
struct Entry {
  std::shared_ptr<const Plugin> plugin;
  const PB_PLUGIN_Profiler_Api* table = nullptr;
  PB_PLUGIN_Profiler* running = nullptr;
  int64_t started_ns = 0;
};

class Registry final : public trace::internal::Collector {
 public:
  void client_made(const std::shared_ptr<const Plugin>& plugin) {
    std::lock_guard lock(mutex_);
    Entry* entry = find(plugin.get());
    if (!entry) {
      if (!checked_.insert(plugin.get()).second) return;  // looked at before: no profiler
      auto table = abi::find_profiler_api(plugin->api());
      if (!table) {
        // An older layout is worth a word in a running trace; no extension at all is the common case.
        if (trace::on() && table.error().message().find("has no profiler extension") == std::string::npos)
          trace::internal::note("plugin profiler: " + table.error().to_string());
        return;
      }
      entries_.push_back(Entry{plugin, *table, nullptr, 0});
      entry = &entries_.back();
    }
    if (trace::on() && !entry->running) start(*entry);
  }

  void started() noexcept override {
    try {
      std::lock_guard lock(mutex_);
      if (!trace::on()) return;  // stopped again before this ran: stopped() has seen to it
      for (Entry& e : entries_) {
        if (e.running) finish(e, /*collect=*/false);  // a profiler of an earlier trace: never collected
        start(e);
      }
    } catch (...) {
    }
  }

  // A profiler started while the trace was stopping (a client made then, or a start() that raced
  // with the stop) is stopped and destroyed here, uncollected: none outlives its trace.
  void stopped() noexcept override {
    try {
      std::lock_guard lock(mutex_);
      if (trace::on()) return;  // a new trace already: its profilers
      for (Entry& e : entries_) {
        try {
          if (e.running) finish(e, /*collect=*/false);
        } catch (...) {
        }
      }
    } catch (...) {
    }
  }

  void stopping() noexcept override {
    try {
      std::lock_guard lock(mutex_);
      for (Entry& e : entries_) {
        try {  // one plugin's failure leaves the others' profilers to be finished
          if (e.running) finish(e, /*collect=*/true);
        } catch (...) {
        }
      }
    } catch (...) {
    }
  }

 private:
  Entry* find(const Plugin* plugin) {
    for (Entry& e : entries_)
      if (e.plugin.get() == plugin) return &e;
    return nullptr;
  }

  // The summary span "plugin profiler", from `start_ns` to now, and a note when it failed.
  static void summary(const Entry& e, int64_t start_ns, std::vector<trace::Arg> args, const Error* error) {
    args.insert(args.begin(), trace::Arg{"plugin", e.plugin->path().string()});
    args.push_back({"outcome", std::string(error ? "failed" : "collected")});
    if (error) {
      args.push_back({"error", error->to_string()});
      trace::internal::note("plugin profiler: " + error->to_string());
    }
    trace::record("plugin profiler", "plugin", start_ns, trace::now(), trace::named_track("plugin profiler"), args);
  }

  void start(Entry& e) {
    const int64_t t0 = trace::now();
    const abi::Api& api = e.plugin->api();
    auto made = abi::profiler_create(api, *e.table, profile_options());
    if (!made) return summary(e, t0, {}, &made.error());
    if (Status s = abi::profiler_start(api, *e.table, *made); !s) {
      (void)abi::profiler_destroy(api, *e.table, *made);
      return summary(e, t0, {}, &s.error());
    }
    e.running = *made;
    e.started_ns = t0;
  }

  // Stops, collects (when asked) and destroys the running profiler of `e`, recording what it saw.
  void finish(Entry& e, bool collect) {
    const abi::Api& api = e.plugin->api();
    PB_PLUGIN_Profiler* p = e.running;
    e.running = nullptr;
    Status stopped = abi::profiler_stop(api, *e.table, p);
    Expected<std::string> data = make_error(Code::kCancelled, "not collected");
    if (stopped && collect) {
      try {  // the data is copied (up to kMaxProfileBytes): the profiler is destroyed whatever happens
        data = abi::profiler_collect(api, *e.table, p, kMaxProfileBytes);
      } catch (...) {
        data = make_error(Code::kResourceExhausted, "no memory for the profile data of " + e.plugin->path().string());
      }
    }
    Status destroyed = abi::profiler_destroy(api, *e.table, p);
    if (!collect) return;
    if (!stopped) return summary(e, e.started_ns, {}, &stopped.error());
    if (!data) return summary(e, e.started_ns, {}, &data.error());
    const trace::internal::ClockPair pair = trace::internal::clock_pair();
    std::vector<trace::Arg> args{{"bytes", static_cast<int64_t>(data->size())}};
    auto space = xspace::decode(*data);
    if (!space) {
      Error error = std::move(space).error().annotate("the profile data of " + e.plugin->path().string());
      return summary(e, e.started_ns, std::move(args), &error);
    }
    const xspace::Counts counts = xspace::count(*space);
    const Recorded recorded = record_space(*space, pair.monotonic_ns, pair.realtime_ns, pair.monotonic_ns);
    args.push_back({"planes", static_cast<int64_t>(counts.planes)});
    args.push_back({"lines", static_cast<int64_t>(counts.lines)});
    args.push_back({"events", static_cast<int64_t>(recorded.events)});
    args.push_back({"events_before_trace", static_cast<int64_t>(recorded.before_start)});
    args.push_back({"clock_offset_change_ns", clock_offset_now() - (pair.realtime_ns - pair.monotonic_ns)});
    std::string errors;
    for (const std::string& m : space->errors) errors += (errors.empty() ? "" : "; ") + m;
    if (!errors.empty()) args.push_back({"plugin_errors", errors});
    if (!destroyed) args.push_back({"destroy_error", destroyed.error().to_string()});
    summary(e, e.started_ns, std::move(args), nullptr);
  }

  std::mutex mutex_;
  std::vector<Entry> entries_;      // plugins with a profiler (few: a deque is not needed, never erased
                                    // while a pointer into it is held outside the lock)
  std::set<const Plugin*> checked_;  // plugins looked at (plugins are never unloaded)
};

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry();  // for the process's life, as the recorder keeps its collectors
    trace::internal::add_collector(made);
    return made;
  }();
  return *r;
}

}  // namespace

void client_made(const std::shared_ptr<const Plugin>& plugin) noexcept {
  if (!plugin || turned_off()) return;
  try {
    registry().client_made(plugin);
  } catch (...) {
  }
}

Status available(const Plugin& plugin) noexcept {
  return no_throw("looking for a plugin's profiler", [&]() -> Status {
    PB_RETURN_IF_ERROR(abi::find_profiler_api(plugin.api()));
    return ok();
  });
}

std::string profile_options() {
  // tensorflow.ProfileOptions, fields in number order: host_tracer_level 2, device_tracer_level 3,
  // version 5 (device_type 6 left at UNSPECIFIED: every device the plugin can trace).
  protobuf_wire::ProtoWriter w;
  w.add_varint(2, 1);
  w.add_varint(3, 1);
  w.add_varint(5, 1);
  return w.bytes();
}

Recorded record_space(const xspace::Space& space, int64_t clock_monotonic_ns, int64_t clock_realtime_ns,
                      int64_t trace_start_ns) noexcept {
  Recorded out;
  try {
    const int64_t offset = clock_realtime_ns - clock_monotonic_ns;  // wall - monotonic at the trace's start
    for (const xspace::Plane& plane : space.planes) {
      for (const xspace::Line& line : plane.lines) {
        if (line.events.empty()) continue;
        const trace::Track track = trace::named_track("plugin " + plane.name + " " + line.name);
        // Each event's times on the trace's clock; one whose times do not fit (a corrupt profile) is
        // counted with the dropped ones.
        struct Timed {
          int64_t start, end;
          const xspace::Event* event;
        };
        std::vector<Timed> events;
        for (const xspace::Event& e : line.events) {
          int64_t start = 0, end = 0, duration_ns = e.duration_ps / 1000;
          if (e.offset_ps < 0 || e.duration_ps < 0 || __builtin_add_overflow(line.timestamp_ns, e.offset_ps / 1000, &start) ||
              __builtin_sub_overflow(start, offset, &start) || __builtin_add_overflow(start, duration_ns, &end)) {
            ++out.before_start;
            continue;
          }
          events.push_back({start, end, &e});
        }
        // Inner before outer (by end, then the later start first): the recorder keeps a named track's
        // spans on one lane when each arrives after those it contains, as spans ending do.
        std::stable_sort(events.begin(), events.end(), [](const Timed& a, const Timed& b) {
          return a.end != b.end ? a.end < b.end : a.start > b.start;
        });
        for (const Timed& timed : events) {
          const xspace::Event* e = timed.event;
          const int64_t start = timed.start, end = timed.end;
          if (start < trace_start_ns) {
            ++out.before_start;
            continue;
          }
          const size_t n = std::min(e->stats.size(), kMaxStatsPerEvent);
          trace::record(e->name, "plugin", start, end, track, std::span<const trace::Arg>(e->stats.data(), n));
          ++out.events;
        }
      }
    }
  } catch (...) {
  }
  return out;
}

}  // namespace plugboard::plugin_profiler
