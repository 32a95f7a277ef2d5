// A plugin's own profiler in the trace (runtime/plugin_profiler.h): the XSpace reader, the fault
// plugin's profiler extension (tests/fixtures/fault_plugin.c, FAULT_PROFILER) driven through a trace
// with a synthetic XSpace this test encodes, its failures, and what the real plugins have.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "abi/profiler.h"
#include "base/trace.h"
#include "runtime/plugin_profiler.h"
#include "runtime/protobuf_wire.h"
#include "runtime/xspace.h"
#include "test_env.h"

namespace plugboard {
namespace {

using protobuf_wire::ProtoWriter;
using testing::ScopedEnv;
using testing::ScratchDir;

// ---- An XSpace encoder of the test's own, fields by number as xplane.proto gives them. ----
struct StatIn {
  int64_t metadata_id;
  int kind;  // 2 double, 3 uint64, 4 int64, 5 string, 7 ref
  double d = 0;
  uint64_t u = 0;
  std::string s;
};
ProtoWriter stat(const StatIn& in) {
  ProtoWriter w;
  w.add_int64(1, in.metadata_id);
  switch (in.kind) {
    case 2: w.add_double(2, in.d); break;
    case 3: w.add_varint(3, in.u); break;
    case 4: w.add_int64(4, static_cast<int64_t>(in.u)); break;
    case 5: w.add_bytes(5, in.s); break;
    case 7: w.add_varint(7, in.u); break;
  }
  return w;
}
ProtoWriter event(int64_t metadata_id, int64_t offset_ps, int64_t duration_ps, const std::vector<StatIn>& stats = {}) {
  ProtoWriter w;
  w.add_int64(1, metadata_id);
  w.add_int64(2, offset_ps);
  w.add_int64(3, duration_ps);
  for (const StatIn& s : stats) w.add_message(4, stat(s));
  return w;
}
ProtoWriter aggregate_event(int64_t metadata_id, int64_t occurrences) {
  ProtoWriter w;
  w.add_int64(1, metadata_id);
  w.add_int64(3, 1000);
  w.add_int64(5, occurrences);
  return w;
}
ProtoWriter line(int64_t id, std::string_view name, std::string_view display_name, int64_t timestamp_ns,
                 const std::vector<ProtoWriter>& events) {
  ProtoWriter w;
  w.add_int64(1, id);
  if (!name.empty()) w.add_bytes(2, name);
  w.add_int64(3, timestamp_ns);
  for (const ProtoWriter& e : events) w.add_message(4, e);
  w.add_int64(10, id);
  if (!display_name.empty()) w.add_bytes(11, display_name);
  return w;
}
ProtoWriter event_metadata_entry(int64_t id, std::string_view name, std::string_view display_name) {
  ProtoWriter m;
  m.add_int64(1, id);
  m.add_bytes(2, name);
  if (!display_name.empty()) m.add_bytes(4, display_name);
  ProtoWriter entry;
  entry.add_int64(1, id);
  entry.add_message(2, m);
  return entry;
}
ProtoWriter stat_metadata_entry(int64_t id, std::string_view name) {
  ProtoWriter m;
  m.add_int64(1, id);
  m.add_bytes(2, name);
  ProtoWriter entry;
  entry.add_int64(1, id);
  entry.add_message(2, m);
  return entry;
}

// A GPU plane with a stream of three kernels (one nested in another, one before `before_ns` of wall
// time), and a host plane with one thread and an aggregate; every line starts at `wall_ns`.
std::string synthetic_space(int64_t wall_ns) {
  ProtoWriter gpu;
  gpu.add_int64(1, 7);
  gpu.add_bytes(2, "/device:GPU:0");
  // The events come in no particular order, as a plugin may write them.
  gpu.add_message(3, line(7, "Stream #7", "Stream #7(Compute)", wall_ns,
                          {event(2, 1'500'000'000, 500'000'000, {{10, 7, 0, 11}, {12, 4, 0, 3}}),  // inner: 1.5 ms + 0.5 ms
                           event(1, 1'000'000'000, 2'000'000'123, {{10, 5, 0, 0, "fusion.1"}, {13, 3, 0, 42}}),
                           event(3, 5'000'000'000, 250'000'000, {{14, 2, 2.5}})}));
  // A line whose events began ten seconds before the trace: counted, not kept.
  gpu.add_message(3, line(8, "Stream #8", "", wall_ns - 10'000'000'000, {event(1, 0, 1'000'000)}));
  gpu.add_message(4, event_metadata_entry(1, "loop_fusion_kernel", "fusion.1"));
  gpu.add_message(4, event_metadata_entry(2, "cutlass_gemm", ""));
  gpu.add_message(4, event_metadata_entry(3, "memcpy_d2h", "MemcpyD2H"));
  gpu.add_message(5, stat_metadata_entry(10, "hlo_op"));
  gpu.add_message(5, stat_metadata_entry(11, "dot.3"));
  gpu.add_message(5, stat_metadata_entry(12, "stream_id"));
  gpu.add_message(5, stat_metadata_entry(13, "correlation_id"));
  gpu.add_message(5, stat_metadata_entry(14, "memcpy_gbps"));
  ProtoWriter host;
  host.add_int64(1, 1);
  host.add_bytes(2, "/host:CPU");
  host.add_message(3, line(1234, "", "", wall_ns, {event(1, 200'000, 100'000), aggregate_event(1, 5)}));
  host.add_message(4, event_metadata_entry(1, "PjRtStreamExecutorLoadedExecutable::Execute", ""));
  ProtoWriter space;
  space.add_message(1, gpu);
  space.add_message(1, host);
  space.add_bytes(4, "gpu-host-1");
  return space.bytes();
}

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

const trace::Arg* arg(const std::vector<trace::Arg>& args, std::string_view key) {
  for (const trace::Arg& a : args)
    if (a.key == key) return &a;
  return nullptr;
}

// ---- The reader ----

TEST(XSpaceDecode, NamesStatsAndTimesComeFromThePlanesMaps) {
  auto space = xspace::decode(synthetic_space(1'700'000'000'000'000'000));
  ASSERT_TRUE(space) << space.error().to_string();
  ASSERT_EQ(space->planes.size(), 2u);
  EXPECT_EQ(space->hostnames, std::vector<std::string>{"gpu-host-1"});
  const xspace::Plane& gpu = space->planes[0];
  EXPECT_EQ(gpu.name, "/device:GPU:0");
  EXPECT_EQ(gpu.id, 7);
  ASSERT_EQ(gpu.lines.size(), 2u);
  EXPECT_EQ(gpu.lines[0].name, "Stream #7(Compute)") << "display_name before name";
  EXPECT_EQ(gpu.lines[1].name, "Stream #8");
  EXPECT_EQ(gpu.lines[0].timestamp_ns, 1'700'000'000'000'000'000);
  ASSERT_EQ(gpu.lines[0].events.size(), 3u);
  const xspace::Event& inner = gpu.lines[0].events[0];
  EXPECT_EQ(inner.name, "cutlass_gemm") << "no display_name: the name";
  EXPECT_EQ(inner.offset_ps, 1'500'000'000);
  EXPECT_EQ(inner.duration_ps, 500'000'000);
  ASSERT_EQ(inner.stats.size(), 2u);
  EXPECT_EQ(inner.stats[0].key, "hlo_op");
  EXPECT_EQ(std::get<std::string>(inner.stats[0].value), "dot.3") << "a ref_value names a stat metadata";
  EXPECT_EQ(std::get<int64_t>(inner.stats[1].value), 3);
  const xspace::Event& outer = gpu.lines[0].events[1];
  EXPECT_EQ(outer.name, "fusion.1") << "display_name before name";
  EXPECT_EQ(outer.duration_ps, 2'000'000'123);
  EXPECT_EQ(std::get<std::string>(outer.stats[0].value), "fusion.1");
  EXPECT_EQ(std::get<int64_t>(outer.stats[1].value), 42);
  EXPECT_EQ(gpu.lines[0].events[2].name, "MemcpyD2H");
  EXPECT_DOUBLE_EQ(std::get<double>(gpu.lines[0].events[2].stats[0].value), 2.5);
  const xspace::Plane& host = space->planes[1];
  ASSERT_EQ(host.lines.size(), 1u);
  EXPECT_EQ(host.lines[0].name, "line 1234") << "a line with no name";
  EXPECT_EQ(host.lines[0].events.size(), 1u) << "an aggregate has no time: counted, not an event";
  EXPECT_EQ(host.lines[0].aggregates, 1u);
  const xspace::Counts c = xspace::count(*space);
  EXPECT_EQ(c.planes, 2u);
  EXPECT_EQ(c.lines, 3u);
  EXPECT_EQ(c.events, 5u);
}

TEST(XSpaceDecode, EmptyBytesAreAnEmptySpace) {
  auto space = xspace::decode("");
  ASSERT_TRUE(space) << space.error().to_string();
  EXPECT_TRUE(space->planes.empty());
}

TEST(XSpaceDecode, BytesThatAreNotAnXSpaceAreDataLoss) {
  const std::string good = synthetic_space(1'700'000'000'000'000'000);
  ProtoWriter wrong_type_line;  // XLine.timestamp_ns (a varint) given as a string
  wrong_type_line.add_bytes(3, "yesterday");
  ProtoWriter plane;
  plane.add_message(3, wrong_type_line);
  ProtoWriter space;
  space.add_message(1, plane);
  for (const std::string& bad : {std::string("this is not an XSpace"), good.substr(0, good.size() / 2),
                                  space.bytes(), std::string("\x0a\xff\xff\xff\xff\x0f", 6)}) {
    auto decoded = xspace::decode(bad);
    ASSERT_FALSE(decoded) << "decoded " << bad.size() << " bad bytes";
    EXPECT_EQ(decoded.error().code(), Code::kDataLoss) << decoded.error().to_string();
    EXPECT_NE(decoded.error().to_string().find("XSpace"), std::string::npos) << decoded.error().to_string();
  }
}

// ---- The fault plugin's profiler, through a trace ----

std::filesystem::path fault_profiler() { return PLUGBOARD_FIXTURE_FAULT_PROFILER; }

// The calls the copy of the fault plugin behind `plugin` made, from the log every copy writes to
// (each line: its PJRT_Api's address, the call), as "create start ...".
std::string calls_of(const Plugin& plugin, const std::filesystem::path& log) {
  char id[32];
  std::snprintf(id, sizeof(id), "%p ", static_cast<const void*>(plugin.api().raw()));
  std::ifstream in(log);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind(id, 0) == 0) out += line.substr(std::strlen(id)) + " ";
  return out;
}

const trace::Span* span_named(const trace::Trace& t, std::string_view name) {
  for (const trace::Span& s : t.spans)
    if (s.name == name) return &s;
  return nullptr;
}
// The "plugin profiler" span of `plugin` (a process may hold several plugins with a profiler).
const trace::Span* summary_of(const trace::Trace& t, const Plugin& plugin) {
  for (const trace::Span& s : t.spans)
    if (s.name == "plugin profiler")
      for (const trace::Arg& a : s.args)
        if (a.key == "plugin" && std::get<std::string>(a.value) == plugin.path().string()) return &s;
  return nullptr;
}
std::vector<std::string> notes_of(const trace::Trace& t, const Plugin& plugin) {
  std::vector<std::string> out;
  for (const std::string& n : t.notes)
    if (n.find(plugin.path().string()) != std::string::npos) out.push_back(n);
  return out;
}
std::string track_of(const trace::Trace& t, int tid) {
  for (const trace::TrackName& n : t.tracks)
    if (n.tid == tid) return n.name;
  return "";
}

// With PLUGBOARD_PROFILER_TEST_TRACES=DIR, a test's trace is also written to DIR/NAME.json (for
// tests/gpu_check_profiler_test.sh, which checks scripts/gpu_check.sh's trace checks on them).
void keep_trace(const trace::Trace& t, const std::string& name) {
  const char* dir = std::getenv("PLUGBOARD_PROFILER_TEST_TRACES");
  if (!dir || !*dir) return;
  Status written = t.write(std::filesystem::path(dir) / (name + ".json"));
  EXPECT_TRUE(written) << written.error().to_string();
}

// Each test loads a copy of the fault plugin of its own (another file: another plugin to this
// process), so that what it checks is that copy's, whichever tests ran before in the process.
class PluginProfiler : public ::testing::Test {
 protected:
  std::shared_ptr<const Plugin> fresh_plugin() {
    const std::filesystem::path copy = dir / ("libfault_profiler_" + std::to_string(copies_++) + ".so");
    std::filesystem::copy_file(fault_profiler(), copy);
    auto plugin = load_plugin(copy);
    EXPECT_TRUE(plugin) << plugin.error().to_string();
    return plugin ? *plugin : nullptr;
  }
  std::shared_ptr<Client> client_of(const std::shared_ptr<const Plugin>& plugin) {
    auto client = Client::create(plugin);
    EXPECT_TRUE(client) << client.error().to_string();
    return client ? *client : nullptr;
  }
  std::string calls(const std::shared_ptr<const Plugin>& plugin) { return calls_of(*plugin, log); }

  ScratchDir dir;
  std::filesystem::path log = dir / "profiler.log";
  ScopedEnv log_env{"PLUGBOARD_FAULT_PROFILER_LOG", log.string()};
  int copies_ = 0;
};

TEST_F(PluginProfiler, ASyntheticXSpaceBecomesSpansOnTheTracesClock) {
  auto plugin = fresh_plugin();
  ASSERT_TRUE(plugin);
  auto client = client_of(plugin);
  ASSERT_TRUE(client);
  const std::filesystem::path data = dir / "space.pb";
  ScopedEnv mode("PLUGBOARD_FAULT_PROFILER", "file:" + data.string());
  ASSERT_TRUE(trace::start());
  EXPECT_EQ(calls(plugin), "create start ") << "the plugin's profiler starts with the trace";
  // The plugin's view: its lines start at its wall clock now; the test reads ours beside it.
  const int64_t mono_before = trace::now();
  const int64_t wall = realtime_ns();
  const int64_t mono_after = trace::now();
  {
    std::ofstream out(data, std::ios::binary);
    out << synthetic_space(wall);
  }
  trace::record("test work", "test", mono_before, mono_after + 7'000'000, trace::this_thread_track());
  // The plugin's events (up to 5.25 ms after `wall`) are over before the trace stops, as a real
  // plugin's are.
  std::this_thread::sleep_for(std::chrono::milliseconds(8));
  auto t = trace::stop();
  ASSERT_TRUE(t) << t.error().to_string();
  keep_trace(*t, "synthetic");
  EXPECT_EQ(calls(plugin), "create start stop collect_size collect_bytes destroy ");
  EXPECT_TRUE(notes_of(*t, *plugin).empty()) << notes_of(*t, *plugin).front();

  // Each event on the trace's clock through the trace's own pair: exact to the nanosecond.
  const int64_t offset = t->clock_realtime_ns - t->clock_monotonic_ns;
  const trace::Span* outer = span_named(*t, "fusion.1");
  const trace::Span* inner = span_named(*t, "cutlass_gemm");
  const trace::Span* copy = span_named(*t, "MemcpyD2H");
  const trace::Span* host = span_named(*t, "PjRtStreamExecutorLoadedExecutable::Execute");
  ASSERT_TRUE(outer && inner && copy && host);
  EXPECT_EQ(outer->start_ns, wall + 1'000'000 - offset);
  EXPECT_EQ(outer->end_ns, wall + 3'000'000 - offset) << "2'000'000'123 ps end at the nanosecond below";
  EXPECT_EQ(inner->start_ns, wall + 1'500'000 - offset);
  EXPECT_EQ(inner->end_ns, wall + 2'000'000 - offset);
  EXPECT_EQ(copy->start_ns, wall + 5'000'000 - offset);
  EXPECT_EQ(host->start_ns, wall + 200 - offset);
  // And against this test's own reading of the clocks (the pair may be read microseconds apart).
  EXPECT_GE(outer->start_ns, mono_before + 1'000'000 - 1'000'000);
  EXPECT_LE(outer->start_ns, mono_after + 1'000'000 + 1'000'000);
  for (const trace::Span* s : {outer, inner, copy, host}) EXPECT_EQ(s->category, "plugin") << s->name;
  EXPECT_EQ(track_of(*t, outer->tid), "plugin /device:GPU:0 Stream #7(Compute)");
  EXPECT_EQ(track_of(*t, copy->tid), "plugin /device:GPU:0 Stream #7(Compute)");
  EXPECT_EQ(track_of(*t, host->tid), "plugin /host:CPU line 1234");
  const trace::Arg* hlo = arg(inner->args, "hlo_op");
  ASSERT_TRUE(hlo);
  EXPECT_EQ(std::get<std::string>(hlo->value), "dot.3");
  const trace::Arg* correlation = arg(outer->args, "correlation_id");
  ASSERT_TRUE(correlation);
  EXPECT_EQ(std::get<int64_t>(correlation->value), 42);
  EXPECT_EQ(std::count_if(t->spans.begin(), t->spans.end(), [](const trace::Span& s) { return s.category == "plugin" && s.name != "plugin profiler"; }),
            4) << "Stream #8's event began before the trace: not kept";

  const trace::Span* summary = summary_of(*t, *plugin);
  ASSERT_TRUE(summary);
  EXPECT_EQ(track_of(*t, summary->tid), "plugin profiler");
  EXPECT_EQ(std::get<std::string>(arg(summary->args, "outcome")->value), "collected");
  EXPECT_EQ(std::get<int64_t>(arg(summary->args, "planes")->value), 2);
  EXPECT_EQ(std::get<int64_t>(arg(summary->args, "events")->value), 4);
  EXPECT_EQ(std::get<int64_t>(arg(summary->args, "events_before_trace")->value), 1);
  EXPECT_GT(std::get<int64_t>(arg(summary->args, "bytes")->value), 100);
  const int64_t drift = std::get<int64_t>(arg(summary->args, "clock_offset_change_ns")->value);
  EXPECT_LT(std::abs(drift), 10'000'000) << "the wall clock moved against the monotonic one by " << drift << " ns";
  EXPECT_GE(summary->start_ns, t->started_ns);
  EXPECT_LE(summary->end_ns, t->stopped_ns);
  for (const trace::Span& s : t->spans) {
    EXPECT_GE(s.start_ns, t->started_ns) << s.name;
    EXPECT_LE(s.end_ns, t->stopped_ns) << s.name;
  }

  // The JSON holds them with their tracks named.
  auto text = t->to_json();
  ASSERT_TRUE(text) << text.error().to_string();
  EXPECT_NE(text->find("\"name\":\"plugin /device:GPU:0 Stream #7(Compute)\""), std::string::npos);
  EXPECT_NE(text->find("\"cat\":\"plugin\""), std::string::npos);
  if (t->notes.empty()) {
    EXPECT_EQ(text->find("\"notes\""), std::string::npos) << "no notes when nothing failed";
  }
}

// XLA's plugins (jax-cuda's) answer the first CollectData call with the data in a buffer of their own,
// one zero byte longer than the XSpace, and ignore a second call: read as they give it.
TEST_F(PluginProfiler, APluginThatHandsOutItsOwnBufferAsXlasDoIsRead) {
  auto plugin = fresh_plugin();
  ASSERT_TRUE(plugin);
  auto client = client_of(plugin);
  ASSERT_TRUE(client);
  const std::filesystem::path data = dir / "space.pb";
  ScopedEnv mode("PLUGBOARD_FAULT_PROFILER", "owned:file:" + data.string());
  ASSERT_TRUE(trace::start());
  {
    std::ofstream out(data, std::ios::binary);
    out << synthetic_space(realtime_ns());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(8));
  auto t = trace::stop();
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(calls(plugin), "create start stop collect_size destroy ") << "one CollectData call";
  EXPECT_TRUE(notes_of(*t, *plugin).empty()) << notes_of(*t, *plugin).front();
  const trace::Span* summary = summary_of(*t, *plugin);
  ASSERT_TRUE(summary);
  EXPECT_EQ(std::get<std::string>(arg(summary->args, "outcome")->value), "collected");
  EXPECT_EQ(std::get<int64_t>(arg(summary->args, "events")->value), 4);
  EXPECT_TRUE(span_named(*t, "cutlass_gemm"));
}

// A zero byte after an XSpace (XLA's padding) is not a field: the space decodes as without it; a
// zero anywhere else still is not an XSpace.
TEST(XSpaceDecode, OneZeroByteAfterTheSpaceIsPadding) {
  const std::string good = synthetic_space(1'700'000'000'000'000'000);
  auto padded = xspace::decode(good + std::string(1, '\0'));
  ASSERT_TRUE(padded) << padded.error().to_string();
  auto plain = xspace::decode(good);
  ASSERT_TRUE(plain);
  EXPECT_EQ(xspace::count(*padded).events, xspace::count(*plain).events);
  EXPECT_EQ(xspace::count(*padded).planes, 2u);
  EXPECT_FALSE(xspace::decode(good + std::string(2, '\0'))) << "two zeros are not padding";
  EXPECT_FALSE(xspace::decode(std::string(1, '\0') + good));
}

TEST_F(PluginProfiler, AClientMadeWhileATraceRunsStartsItsPluginsProfiler) {
  auto plugin = fresh_plugin();
  ASSERT_TRUE(plugin);
  ASSERT_TRUE(trace::start());
  EXPECT_EQ(calls(plugin), "") << "no client of it yet: its profiler is not started";
  auto client = client_of(plugin);
  ASSERT_TRUE(client);
  EXPECT_EQ(calls(plugin), "create start ");
  auto t = trace::stop();
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(calls(plugin), "create start stop collect_size destroy ") << "no data: one call for its size";
  const trace::Span* summary = summary_of(*t, *plugin);
  ASSERT_TRUE(summary);
  EXPECT_EQ(std::get<std::string>(arg(summary->args, "outcome")->value), "collected");
  EXPECT_EQ(std::get<int64_t>(arg(summary->args, "events")->value), 0);
  // The next trace starts it again, and stops it with itself.
  ASSERT_TRUE(trace::start());
  auto again = trace::stop();
  ASSERT_TRUE(again);
  EXPECT_EQ(calls(plugin), "create start stop collect_size destroy create start stop collect_size destroy ");
}

// A profiler that fails, or hands back what is not an XSpace: the trace is still whole, and says why.
struct Failure {
  const char* mode;
  const char* log;        // the plugin's calls
  const char* expected;   // in the note and the summary's error
};
class PluginProfilerFailure : public PluginProfiler, public ::testing::WithParamInterface<Failure> {};

TEST_P(PluginProfilerFailure, NeverFailsTheTraceAndIsRecordedInIt) {
  const Failure& f = GetParam();
  auto plugin = fresh_plugin();
  ASSERT_TRUE(plugin);
  auto client = client_of(plugin);
  ASSERT_TRUE(client);
  ScopedEnv mode("PLUGBOARD_FAULT_PROFILER", f.mode);
  ASSERT_TRUE(trace::start());
  const int64_t t0 = trace::now();
  trace::record("test work", "test", t0, t0 + 1000, trace::this_thread_track());
  auto t = trace::stop();
  ASSERT_TRUE(t) << "a plugin profiler's failure failed the trace: " << t.error().to_string();
  keep_trace(*t, f.mode);
  EXPECT_EQ(calls(plugin), f.log) << "every profiler made is destroyed";
  EXPECT_TRUE(span_named(*t, "test work")) << "the trace's own spans are kept";
  const std::vector<std::string> notes = notes_of(*t, *plugin);
  ASSERT_EQ(notes.size(), 1u) << "a note naming the plugin";
  EXPECT_NE(notes[0].find(f.expected), std::string::npos) << notes[0];
  const trace::Span* summary = summary_of(*t, *plugin);
  ASSERT_TRUE(summary);
  EXPECT_EQ(std::get<std::string>(arg(summary->args, "outcome")->value), "failed");
  const trace::Arg* error = arg(summary->args, "error");
  ASSERT_TRUE(error);
  EXPECT_NE(std::get<std::string>(error->value).find(f.expected), std::string::npos);
  // Written, with the note under otherData.
  const std::filesystem::path file = dir / "trace.json";
  ASSERT_TRUE(t->write(file));
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"notes\":[\"plugin profiler: "), std::string::npos) << text.str();
}

INSTANTIATE_TEST_SUITE_P(
    Modes, PluginProfilerFailure,
    ::testing::Values(Failure{"fail_create", "create ", "PLUGIN_Profiler_Create fails on purpose"},
                      Failure{"fail_start", "create start destroy ", "PLUGIN_Profiler_Start fails on purpose"},
                      Failure{"fail_stop", "create start stop destroy ", "PLUGIN_Profiler_Stop fails on purpose"},
                      Failure{"fail_collect", "create start stop collect_size destroy ",
                              "PLUGIN_Profiler_CollectData fails on purpose"},
                      Failure{"garbage", "create start stop collect_size collect_bytes destroy ",
                              "not a well-formed XSpace"}),
    [](const ::testing::TestParamInfo<Failure>& info) { return std::string(info.param.mode); });

TEST_F(PluginProfiler, TurnedOffByTheEnvironmentNothingIsCalled) {
  ScopedEnv off("PLUGBOARD_PLUGIN_PROFILER", "0");
  auto plugin = fresh_plugin();
  ASSERT_TRUE(plugin);
  auto client = client_of(plugin);
  ASSERT_TRUE(client);
  ASSERT_TRUE(trace::start());
  auto t = trace::stop();
  ASSERT_TRUE(t);
  EXPECT_EQ(calls(plugin), "");
  EXPECT_FALSE(summary_of(*t, *plugin));
}

TEST(PluginProfilerOptions, AreProfileOptionsWithDeviceAndHostTracing) {
  // tensorflow.ProfileOptions: host_tracer_level (2) 1, device_tracer_level (3) 1, version (5) 1.
  EXPECT_EQ(plugin_profiler::profile_options(), std::string("\x10\x01\x18\x01\x28\x01", 6));
}

// ---- The real plugins ----

class CpuPluginProfiler : public ::testing::TestWithParam<testing::RealPlugin> {};

TEST_P(CpuPluginProfiler, HasNoProfilerExtensionAndATraceSaysNothingOfIt) {
  auto plugin = load_plugin(GetParam().path);
  ASSERT_TRUE(plugin) << plugin.error().to_string();
  Status available = plugin_profiler::available(**plugin);
  ASSERT_FALSE(available);
  EXPECT_EQ(available.error().code(), Code::kUnimplemented);
  EXPECT_NE(available.error().to_string().find("has no profiler extension"), std::string::npos);
  ASSERT_TRUE(trace::start());
  auto client = Client::create(*plugin);
  ASSERT_TRUE(client) << client.error().to_string();
  auto t = trace::stop();
  ASSERT_TRUE(t);
  EXPECT_FALSE(summary_of(*t, **plugin));
  EXPECT_TRUE(notes_of(*t, **plugin).empty());
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuPluginProfiler, ::testing::ValuesIn(testing::cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

TEST(CudaPluginProfiler, HasTheProfilerExtensionReadableWithoutAGpu) {
  // Loading needs no GPU (a client does): the extension chain is there after GetPjrtApi.
  auto plugin = load_plugin(testing::cuda_plugin().path);
  ASSERT_TRUE(plugin) << plugin.error().to_string();
  Status available = plugin_profiler::available(**plugin);
  EXPECT_TRUE(available) << available.error().to_string();
  auto table = abi::find_profiler_api((*plugin)->api());
  ASSERT_TRUE(table);
  EXPECT_GE((*table)->struct_size, offsetof(PB_PLUGIN_Profiler_Api, collect_data) + sizeof(void*));
}

}  // namespace
}  // namespace plugboard
