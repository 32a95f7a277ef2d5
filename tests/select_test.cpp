// Boot-time selection: every stage's failure, with real plugins where they fail for real (the CUDA
// plugin's client, the ROCm plugin's dependencies) and the fault plugin for the rest (crash, hang, ...).
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "base/sha256.h"
#include "base/terminal_text.h"
#include "bundle/assemble.h"
#include "bundle/boot.h"
#include "bundle/manifest.h"
#include "select/isolate_protocol.h"
#include "select/select.h"
#include "test_env.h"

namespace plugboard::select {
namespace {
using plugboard::testing::cpu_plugins;
using plugboard::testing::cuda_plugin;
using plugboard::testing::deps_dir;

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("pb_select_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

Candidate candidate(std::string name, std::filesystem::path path, int priority = 0) {
  Candidate c;
  c.name = std::move(name);
  c.platform = "test";
  c.source = "test";
  c.path = std::move(path);
  c.priority = priority;
  return c;
}

Candidate fault(std::string name, const std::string& mode, int priority = 100) {
  Candidate c = candidate(std::move(name), PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, priority);
  if (!mode.empty()) c.create_options.push_back({"fault", mode});
  return c;
}

SelectOptions quiet_options() {
  SelectOptions o;
  o.verify.stamp_dir = "";  // no stamps written by tests unless they ask
  o.isolation.timeout = std::chrono::milliseconds(3000);
  return o;
}

const CandidateReport& only(const Selection& s, const std::string& name) {
  for (const auto& c : s.report.candidates)
    if (c.candidate.name == name) return c;
  ADD_FAILURE() << "no candidate " << name << " in\n" << s.report.to_text();
  static CandidateReport none;
  return none;
}

// ---- probes ----

struct FakeMachine {
  std::filesystem::path root = temp_dir("dev");
  std::map<std::string, std::string> env;
  ProbeEnvironment probe_env() const {
    ProbeEnvironment e;
    e.dev_root = root / "dev";
    e.getenv = [env = env](const std::string& n) -> std::optional<std::string> {
      auto it = env.find(n);
      return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    e.resolve.ld_library_path = (root / "lib").string();
    e.resolve.ld_so_conf = root / "no-ld.so.conf";
    e.resolve.default_dirs = {};
    return e;
  }
  void touch(const std::string& rel) {
    std::filesystem::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << "";
  }
};

TEST(Probe, CudaNeedsNodeAndDriverAndVisibility) {
  FakeMachine m;
  std::filesystem::create_directories(m.root / "dev");
  EXPECT_FALSE(probe(ProbeKind::kCuda, m.probe_env()).available);
  EXPECT_NE(probe(ProbeKind::kCuda, m.probe_env()).reason.find("nvidia[0-9]*"), std::string::npos);
  m.touch("dev/nvidiactl");  // the control node alone is no GPU
  EXPECT_FALSE(probe(ProbeKind::kCuda, m.probe_env()).available);
  m.touch("dev/nvidia0");
  ProbeResult no_driver = probe(ProbeKind::kCuda, m.probe_env());
  EXPECT_FALSE(no_driver.available);
  EXPECT_NE(no_driver.reason.find("libcuda.so.1"), std::string::npos) << no_driver.reason;
  std::filesystem::create_directories(m.root / "lib");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_COMPANION_DEP, m.root / "lib/libcuda.so.1");  // any 64-bit ELF
  ProbeResult yes = probe(ProbeKind::kCuda, m.probe_env());
  EXPECT_TRUE(yes.available) << yes.reason;
  for (const char* hidden : {"", "-1", "NoDevFiles"}) {
    m.env["CUDA_VISIBLE_DEVICES"] = hidden;
    ProbeResult r = probe(ProbeKind::kCuda, m.probe_env());
    EXPECT_FALSE(r.available) << hidden;
    EXPECT_NE(r.reason.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
  }
  m.env["CUDA_VISIBLE_DEVICES"] = "0";
  EXPECT_TRUE(probe(ProbeKind::kCuda, m.probe_env()).available);
}

TEST(Probe, RocmNeedsKfdAndRenderNode) {
  FakeMachine m;
  m.touch("dev/null");
  EXPECT_NE(probe(ProbeKind::kRocm, m.probe_env()).reason.find("kfd"), std::string::npos);
  m.touch("dev/kfd");
  EXPECT_NE(probe(ProbeKind::kRocm, m.probe_env()).reason.find("renderD"), std::string::npos);
  m.touch("dev/dri/renderD128");
  EXPECT_TRUE(probe(ProbeKind::kRocm, m.probe_env()).available);
  m.env["ROCR_VISIBLE_DEVICES"] = "";
  EXPECT_NE(probe(ProbeKind::kRocm, m.probe_env()).reason.find("ROCR_VISIBLE_DEVICES"), std::string::npos);
}

TEST(Probe, TpuNeedsAccelOrVfio) {
  FakeMachine m;
  m.touch("dev/null");
  EXPECT_FALSE(probe(ProbeKind::kTpu, m.probe_env()).available);
  m.touch("dev/accel0");
  EXPECT_TRUE(probe(ProbeKind::kTpu, m.probe_env()).available);
  EXPECT_TRUE(probe(ProbeKind::kNone, m.probe_env()).available);
}

// ---- verification and stamps ----

TEST(Verify, StampSparesTheRehashAndATamperedFileIsRefused) {
  auto dir = temp_dir("verify");
  std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, dir / "p.so");
  Candidate c = candidate("p", dir / "p.so");
  c.size = std::filesystem::file_size(c.path);
  c.sha256 = *sha256_file(c.path);
  VerifyOptions o{dir / "stamps", false};
  auto first = verify_candidate(c, o);
  PB_ASSERT_OK(first);
  EXPECT_EQ(first->how, select::Verification::kHashed);
  auto second = verify_candidate(c, o);
  PB_ASSERT_OK(second);
  EXPECT_EQ(second->how, select::Verification::kStampVouched) << "the stamp should vouch for an unchanged file";
  auto forced = verify_candidate(c, VerifyOptions{dir / "stamps", true});
  PB_ASSERT_OK(forced);
  EXPECT_EQ(forced->how, select::Verification::kHashed);
  // Without a sha256 there is nothing to hash or stamp: said as such, not as "the stamp vouched".
  Candidate unchecked = c;
  unchecked.sha256.reset();
  auto none = verify_candidate(unchecked, o);
  PB_ASSERT_OK(none);
  EXPECT_EQ(none->how, select::Verification::kNoChecksum);

  // Same size, one byte changed, new mtime: the stamp no longer matches, the hash refuses it.
  {
    std::fstream f(c.path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  auto later = std::filesystem::last_write_time(c.path) + std::chrono::seconds(2);
  std::filesystem::last_write_time(c.path, later);
  auto tampered = verify_candidate(c, o);
  ASSERT_FALSE(tampered);
  EXPECT_EQ(tampered.error().code(), Code::kDataLoss);
  EXPECT_NE(tampered.error().message().find("sha256"), std::string::npos) << tampered.error().to_string();

  c.size = *c.size + 1;
  auto wrong_size = verify_candidate(c, o);
  ASSERT_FALSE(wrong_size);
  EXPECT_NE(wrong_size.error().message().find("(size)"), std::string::npos);
}

// ---- each stage's failure, one candidate at a time ----

struct StageCase {
  std::string name;
  Candidate candidate;
  Stage stage;
  std::string reason;  // a piece of the reason
};

std::vector<StageCase> stage_cases() {
  Candidate missing = candidate("missing", "/nonexistent/plugin.so");
  Candidate problem = candidate("problem", PLUGBOARD_FIXTURE_FAULT_WELL_FORMED);
  problem.problem = Error(Code::kInvalidArgument, "targets[0].file leads outside the bundle");
  Candidate bad_sum = candidate("bad_sum", PLUGBOARD_FIXTURE_FAULT_WELL_FORMED);
  bad_sum.sha256 = std::string(64, '0');
  Candidate tpu = fault("tpu", "");
  tpu.probe = ProbeKind::kTpu;
  return {
      {"NotFound", missing, Stage::kFound, "does not exist"},
      {"ManifestProblem", problem, Stage::kFound, "outside the bundle"},
      {"Tampered", bad_sum, Stage::kVerified, "refusing to load it"},
      {"TpuProbe", tpu, Stage::kProbed, "no TPU device node"},
      {"NoGetPjrtApi", candidate("no_get", PLUGBOARD_FIXTURE_NO_GET_PJRT_API), Stage::kLoaded, "does not export GetPjrtApi"},
      {"NullApi", candidate("null_api", PLUGBOARD_FIXTURE_NULL_API), Stage::kLoaded, "returned null"},
      {"WrongMajor", candidate("major", PLUGBOARD_FIXTURE_FAULT_WRONG_MAJOR), Stage::kLoaded, "different major version"},
      {"OldMinor", candidate("minor", PLUGBOARD_FIXTURE_FAULT_OLD_MINOR), Stage::kLoaded, "too old"},
      {"InitError", candidate("init", PLUGBOARD_FIXTURE_FAULT_INIT_ERROR), Stage::kInitialized, "Initialize fails on purpose"},
      {"ApiTooSmall", candidate("small", PLUGBOARD_FIXTURE_FAULT_SMALL_API), Stage::kClient, "PJRT_Client_Create"},
      {"ClientError", fault("client_error", "client_error"), Stage::kClient, "fails on purpose (fault=client_error)"},
      {"ZeroDevices", fault("zero_devices", "zero_devices"), Stage::kDevices, "no addressable device"},
      {"Crash", fault("crash", "crash"), Stage::kClient, "died of SIGSEGV during the client stage"},
      {"Hang", fault("hang", "hang"), Stage::kClient, "did not finish within 3000 ms"},
  };
}

class StageFailure : public ::testing::TestWithParam<StageCase> {};

// Each fault, isolated, as the first choice: its own reason in the report, then fallback to the CPU
// plugin; an explicit choice of it fails with that reason.
TEST_P(StageFailure, ReportsItsReasonFallsBackAndFailsWhenExplicit) {
  const StageCase& c = GetParam();
  std::vector<Candidate> candidates = {c.candidate, candidate("cpu", cpu_plugins()[0].path, -1)};
  candidates[0].priority = 100;
  SelectOptions o = quiet_options();
  o.isolate = true;
  Selection fallback = select_target(candidates, o);
  const CandidateReport& r = only(fallback, c.candidate.name);
  ASSERT_EQ(r.verdict, Verdict::kFailed) << fallback.report.to_text();
  ASSERT_TRUE(r.failed_stage && r.error);
  EXPECT_EQ(stage_name(*r.failed_stage), stage_name(c.stage)) << fallback.report.to_text();
  EXPECT_NE(r.error->to_string().find(c.reason), std::string::npos) << r.error->to_string();
  ASSERT_TRUE(fallback.client) << fallback.report.to_text();
  EXPECT_EQ(fallback.report.chosen_report()->candidate.name, "cpu");
  EXPECT_NE(fallback.report.to_json().find(c.reason.substr(0, 12)), std::string::npos);

  o.target = c.candidate.name;
  Selection explicit_choice = select_target(candidates, o);
  EXPECT_FALSE(explicit_choice.client);
  Status s = explicit_choice.status();
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().to_string().find(c.reason), std::string::npos) << s.error().to_string();
  EXPECT_EQ(s.error().code(), r.error->code()) << "an explicit target's failure keeps its own code";
  EXPECT_EQ(only(explicit_choice, "cpu").verdict, Verdict::kExcluded);
}

INSTANTIATE_TEST_SUITE_P(AllStages, StageFailure, ::testing::ValuesIn(stage_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Select, SlowStartIsTimedAndSucceeds) {
  SelectOptions o = quiet_options();
  Selection s = select_target({fault("slow", "slow:300")}, o);
  ASSERT_TRUE(s.client) << s.report.to_text();
  const auto& r = only(s, "slow");
  double client_ms = 0;
  for (const auto& st : r.stages)
    if (st.stage == Stage::kClient) client_ms = st.ms;
  EXPECT_GE(client_ms, 290) << s.report.to_text();
  EXPECT_EQ(s.client->platform_name(), "fault");
}

TEST(Select, PreferenceOrderAndExclusion) {
  std::vector<Candidate> cs = {fault("a", "client_error", 5), fault("b", "", 1), fault("c", "", 9)};
  SelectOptions o = quiet_options();
  o.preference = {"a", "b"};
  Selection s = select_target(cs, o);
  ASSERT_TRUE(s.client) << s.report.to_text();
  EXPECT_EQ(s.report.chosen_report()->candidate.name, "b");
  EXPECT_EQ(only(s, "a").verdict, Verdict::kFailed);
  EXPECT_EQ(only(s, "c").verdict, Verdict::kExcluded);

  o.preference = {};
  Selection by_priority = select_target(cs, o);  // c (9) first
  EXPECT_EQ(by_priority.report.chosen_report()->candidate.name, "c");
  EXPECT_EQ(only(by_priority, "a").verdict, Verdict::kNotTried);

  o.target = "nosuch";
  Selection none = select_target(cs, o);
  ASSERT_FALSE(none.status());
  EXPECT_NE(none.status().error().to_string().find("no candidate is named nosuch"), std::string::npos);
}

TEST(Select, EnvironmentPolicy) {
  ::setenv("PLUGBOARD_TARGETS", "cuda13, rocm7,cpu", 1);
  SelectOptions o = options_from_environment();
  EXPECT_EQ(o.preference, (std::vector<std::string>{"cuda13", "rocm7", "cpu"}));
  ::setenv("PLUGBOARD_TARGET", "cpu", 1);
  o = options_from_environment();
  EXPECT_EQ(o.target.value_or(""), "cpu");
  EXPECT_EQ(o.policy_source, "PLUGBOARD_TARGET");
  ::unsetenv("PLUGBOARD_TARGET");
  ::unsetenv("PLUGBOARD_TARGETS");
}

// ---- hostile settings and answers (issue 11) ----

// A number in an environment variable is parsed whole: "5s" was 5 ms, "1e3" 1 ms, "abc" ignored. Each
// now fails the boot, naming the variable.
TEST(SelectHostile, EnvironmentNumbersAndFlagsAreStrict) {
  struct Case {
    const char* var;
    const char* value;
  };
  for (Case c : {Case{"PLUGBOARD_ISOLATE_TIMEOUT_MS", "5s"}, Case{"PLUGBOARD_ISOLATE_TIMEOUT_MS", "1e3"},
                 Case{"PLUGBOARD_ISOLATE_TIMEOUT_MS", "abc"}, Case{"PLUGBOARD_ISOLATE_TIMEOUT_MS", "-1"},
                 Case{"PLUGBOARD_ISOLATE_TIMEOUT_MS", "0"}, Case{"PLUGBOARD_ISOLATE_TIMEOUT_MS", " 100"},
                 Case{"PLUGBOARD_ISOLATE_TIMEOUT_MS", "99999999999999999999"}, Case{"PLUGBOARD_PROBES", "maybe"},
                 Case{"PLUGBOARD_ISOLATE", "2"}, Case{"PLUGBOARD_REHASH", "yes please"}}) {
    ::setenv(c.var, c.value, 1);
    bundle::BootOptions b;
    b.discovery.environment = false;
    b.select = options_from_environment(quiet_options());
    ::unsetenv(c.var);
    auto booted = bundle::boot(b);
    ASSERT_FALSE(booted) << c.var << "=" << c.value << " was accepted";
    EXPECT_NE(booted.error().to_string().find(c.var), std::string::npos) << booted.error().to_string();
    // select_target with the same options refuses too, trying nothing.
    Selection s = select_target({fault("f", "")}, b.select);
    EXPECT_FALSE(s.client) << c.var << "=" << c.value;
    ASSERT_FALSE(s.status());
    EXPECT_NE(s.status().error().to_string().find(c.var), std::string::npos) << s.status().error().to_string();
  }
  ::setenv("PLUGBOARD_ISOLATE_TIMEOUT_MS", "250", 1);
  ::setenv("PLUGBOARD_PROBES", "off", 1);
  SelectOptions o = options_from_environment(quiet_options());
  ::unsetenv("PLUGBOARD_ISOLATE_TIMEOUT_MS");
  ::unsetenv("PLUGBOARD_PROBES");
  EXPECT_FALSE(o.problem);
  EXPECT_EQ(o.isolation.timeout.count(), 250);
  EXPECT_FALSE(o.probes);
}

// PLUGBOARD_PROBES=0 turns the probes off, except a TPU target's: it is never loaded without its probe
// (here a fault-plugin copy marked tpu, on a machine without /dev/accel* or /dev/vfio).
TEST(SelectHostile, ATpuTargetIsNeverLoadedWithoutItsProbe) {
  auto dir = temp_dir("tpu_no_probe");
  std::filesystem::create_directories(dir / "plugins");
  for (const char* f : {"tpu.so", "tpu_by_platform.so", "cpu.so"})
    std::filesystem::copy_file(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED, dir / "plugins" / f);
  const auto size = std::to_string(std::filesystem::file_size(dir / "plugins/tpu.so"));
  const std::string sha = *sha256_file(dir / "plugins/tpu.so");
  auto target = [&](const std::string& name, const std::string& platform, const std::string& probe, int priority) {
    return "{\"name\": \"" + name + "\", \"platform\": \"" + platform + "\", \"file\": \"plugins/" + name + ".so\", \"size\": " +
           size + ", \"sha256\": \"" + sha + "\", \"probe\": \"" + probe + "\", \"priority\": " + std::to_string(priority) + "}";
  };
  std::ofstream(dir / bundle::kManifestName) << "{\"schema\": 1, \"targets\": [" << target("tpu", "tpu", "tpu", 110) << ", "
                                            << target("tpu_by_platform", "tpu", "none", 105) << ", "
                                            << target("cpu", "cpu", "none", 10) << "]}";
  FakeMachine m;
  m.touch("dev/null");
  ::setenv("PLUGBOARD_PROBES", "0", 1);
  bundle::BootOptions b;
  b.discovery.bundle = dir;
  b.discovery.environment = false;
  b.select = options_from_environment(quiet_options());
  ::unsetenv("PLUGBOARD_PROBES");
  b.select.probe_env.dev_root = m.root / "dev";  // no /dev/accel*, no /dev/vfio (the libraries as here)
  b.select.probe_env.getenv = nullptr;
  ASSERT_FALSE(b.select.probes);
  auto booted = bundle::boot(b);
  PB_ASSERT_OK(booted);
  const Selection& s = booted->selection;
  ASSERT_TRUE(s.client) << s.report.to_text();
  EXPECT_EQ(s.report.chosen_report()->candidate.name, "cpu") << s.report.to_text();
  for (const char* name : {"tpu", "tpu_by_platform"}) {
    const CandidateReport& r = only(s, name);
    EXPECT_EQ(r.failed_stage, Stage::kProbed) << s.report.to_text();
    ASSERT_TRUE(r.error) << name;
    EXPECT_NE(r.error->message().find("never loaded without its probe"), std::string::npos) << r.error->message();
    EXPECT_NE(r.error->message().find("no TPU device node"), std::string::npos) << r.error->message();
  }
  for (const auto& p : loaded_plugins())
    EXPECT_NE(p->path().filename().string().rfind("tpu", 0), 0u) << "loaded " << p->path();
}

TEST(IsolateProtocol, MalformedAnswersAreErrorsNotExceptions) {
  const char* lines[] = {
      R"({"stage": "loaded", "passed": "yes"})",
      R"({"stage": "loaded", "passed": true, "ms": "fast"})",
      R"({"stage": "loaded", "passed": true, "detail": 5})",
      R"({"stage": "client", "passed": false, "code": "x", "message": "m"})",
      R"({"stage": "client", "passed": false, "code": 99, "message": "m"})",
      R"({"stage": "client", "passed": false, "code": 3, "message": 7})",
      R"({"stage": "client", "passed": false, "code": 3, "message": "m", "context": "c"})",
      R"({"stage": "client", "passed": false, "code": 3, "message": "m", "context": [1]})",
      R"({"stage": "loaded", "stage": "devices", "passed": true})",
      R"({"stage": 5, "passed": true})",
      R"({"passed": true})",
      R"([1, 2])",
      R"({"stage": "loaded", "passed": true)",
  };
  for (const char* line : lines) {
    Expected<isolate_protocol::DecodedStage> d = std::unexpected(Error(Code::kUnknown, "not run"));
    EXPECT_NO_THROW(d = isolate_protocol::decode_stage(line)) << line;
    EXPECT_FALSE(d) << line << " was taken for a stage report";
  }
  auto good = isolate_protocol::decode_stage(R"({"stage": "client", "passed": false, "ms": 2, "code": 14, "message": "m"})");
  PB_ASSERT_OK(good);
  EXPECT_EQ(good->error->code(), Code::kUnavailable);

  for (const char* arg : {R"({"path": "/x", "name": 5})", R"({"path": 5})", R"({"path": "/x", "create_options": []})",
                          R"({"path": "/x", "source": {"a": 1}})", R"({"path": "/x\u0000y"})"}) {
    Expected<Candidate> c = std::unexpected(Error(Code::kUnknown, "not run"));
    EXPECT_NO_THROW(c = isolate_protocol::decode_candidate(arg)) << arg;
    EXPECT_FALSE(c) << arg;
  }
}

// A child (standing in for plugboard-isolate, whose stdout a plugin shares) that answers with
// wrong-typed fields and an escape sequence: the start-up fails with a reason, the report prints it
// harmlessly, and nothing throws.
TEST(IsolateProtocol, AMalformedChildIsAReasonNotAnException) {
  auto dir = temp_dir("fake_child");
  const auto helper = dir / "fake-isolate";
  std::ofstream(helper) << "#!/bin/sh\n"
                           "echo '{\"stage\": \"loaded\", \"passed\": \"yes\", \"ms\": 1}'\n"
                           "echo '{\"stage\": \"loaded\", \"passed\": true, \"ms\": \"slow\"}'\n"
                           "echo '{\"stage\": \"loaded\", \"passed\": false, \"ms\": 1, \"detail\": \"\", \"code\": 13, "
                           "\"message\": \"evil \\u001b]0;pwned\\u0007 \\u001b[2J text\", \"context\": []}'\n";
  std::filesystem::permissions(helper, std::filesystem::perms::owner_all);
  IsolationOptions o;
  o.helper = helper;
  o.timeout = std::chrono::milliseconds(5000);
  Candidate c = fault("evil", "");
  StartOutcome out;
  EXPECT_NO_THROW(out = start_isolated(c, o));
  ASSERT_TRUE(out.failed_stage);
  EXPECT_EQ(*out.failed_stage, Stage::kLoaded);
  ASSERT_TRUE(out.error);
  EXPECT_NE(out.error->message().find("pwned"), std::string::npos) << out.error->message();

  BootReport report;
  CandidateReport r{c};
  r.verdict = Verdict::kFailed;
  r.failed_stage = out.failed_stage;
  r.error = out.error;
  r.stages = out.stages;
  report.candidates.push_back(r);
  const std::string text = report.to_text() + report.reasons();
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_NE(text.find("\\e]0;pwned\\x07"), std::string::npos) << text;
}

// Names, platforms and reasons from manifests, the environment and plugins are printed with their
// control characters spelled out: no escape sequence reaches the terminal, a NUL cuts nothing, and
// bytes that are not UTF-8 do not make the JSON report throw.
TEST(Report, UntrustedTextIsSpelledOut) {
  Candidate c = candidate("evil\x1b[2Jname", "/tmp/p\x9b.so");
  c.platform = std::string("cpu\0hidden", 10);
  c.source = "PJRT_NAMES_AND_LIBRARY_PATHS";
  BootReport report;
  report.policy = "priority";
  CandidateReport r{c};
  r.verdict = Verdict::kFailed;
  r.failed_stage = Stage::kClient;
  r.stages.push_back({Stage::kFound, true, 0.1, "detail\xc2\x9b[31m"});
  r.error = Error(Code::kInternal, "plugin said \x1b[31mred\r\nline2 \xff");
  report.candidates.push_back(r);
  const std::string text = report.to_text();
  for (char bad : {'\x1b', '\0', '\r', '\x9b', '\xff'}) EXPECT_EQ(text.find(bad), std::string::npos) << int(bad) << " in\n" << text;
  EXPECT_NE(text.find("[cpu\\x00hidden]"), std::string::npos) << text;
  EXPECT_NE(text.find("evil\\e[2Jname"), std::string::npos) << text;
  EXPECT_NE(text.find("detail\\u009b[31m"), std::string::npos) << text;
  EXPECT_NE(text.find("red\\r\\nline2 \\xff"), std::string::npos) << text;
  const std::string reasons = report.reasons();
  EXPECT_EQ(reasons.find('\x1b'), std::string::npos) << reasons;
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), '\n'), 1) << "one line per failed candidate: " << reasons;
  std::string json;
  EXPECT_NO_THROW(json = report.to_json());
  EXPECT_EQ(json.find('\x1b'), std::string::npos);
  EXPECT_NE(json.find("hidden"), std::string::npos) << json;
}

TEST(TerminalText, SpellsOutControlsAndKeepsPrintableUtf8) {
  EXPECT_EQ(terminal_safe("plain text"), "plain text");
  EXPECT_EQ(terminal_safe("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(terminal_safe(std::string("a\0b\x1b\x7f\t", 6)), "a\\x00b\\e\\x7f\\t");
  EXPECT_EQ(terminal_safe("l1\nl2"), "l1\\nl2");
  EXPECT_EQ(terminal_safe("l1\nl2", Newlines::kKeep), "l1\nl2");
  EXPECT_EQ(terminal_safe("\xc2\x85|\xc2\xa0"), "\\u0085|\xc2\xa0");         // NEL is a C1 control, NBSP is not
  EXPECT_EQ(terminal_safe("\xc0\xaf|\xed\xa0\x80|\xe2\x9c"), "\\xc0\\xaf|\\xed\\xa0\\x80|\\xe2\\x9c");  // overlong, surrogate, cut
}

// ---- the real plugins ----

Candidate real(std::string name, std::filesystem::path path, ProbeKind probe, int priority) {
  Candidate c = candidate(std::move(name), std::move(path), priority);
  c.probe = probe;
  return c;
}

std::vector<Candidate> real_machine_candidates() {
  return {real("cuda13", cuda_plugin().path, ProbeKind::kCuda, 100),
          real("rocm7", deps_dir() / "files/rocm7_116/xla_rocm_plugin.so", ProbeKind::kRocm, 90),
          real("cpu", cpu_plugins()[0].path, ProbeKind::kNone, 10)};
}

bool machine_has_gpu() { return std::filesystem::exists("/dev/nvidia0") || std::filesystem::exists("/dev/kfd"); }

TEST(RealPlugins, ProbesSkipCudaAndRocmWithoutLoadingThem) {
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a GPU node: the probe rightly lets it through";
  Selection s = select_target(real_machine_candidates(), quiet_options());
  ASSERT_TRUE(s.client) << s.report.to_text();
  EXPECT_EQ(s.report.chosen_report()->candidate.name, "cpu");
  EXPECT_EQ(only(s, "cuda13").failed_stage, Stage::kProbed) << s.report.to_text();
  EXPECT_EQ(only(s, "rocm7").failed_stage, Stage::kProbed) << s.report.to_text();
  for (const auto& p : loaded_plugins()) EXPECT_NE(p->path().filename(), "xla_cuda_plugin.so") << "the probe should have spared the load";
}

TEST(RealPlugins, WithoutProbesRocmStopsAtDependenciesAndCudaAtItsClient) {
  if (machine_has_gpu()) GTEST_SKIP() << "this machine has a GPU: the CUDA client would start";
  SelectOptions o = quiet_options();
  o.probes = false;
  Selection s = select_target(real_machine_candidates(), o);
  ASSERT_TRUE(s.client) << s.report.to_text();
  EXPECT_EQ(s.report.chosen_report()->candidate.name, "cpu");
  const auto& rocm = only(s, "rocm7");
  EXPECT_EQ(rocm.failed_stage, Stage::kDependencies) << s.report.to_text();
  EXPECT_NE(rocm.error->message().find("librocprofiler-sdk.so.1"), std::string::npos) << rocm.error->message();
  const auto& cuda = only(s, "cuda13");
  EXPECT_EQ(cuda.failed_stage, Stage::kClient) << s.report.to_text();
  EXPECT_NE(cuda.error->to_string().find("No visible GPU devices"), std::string::npos) << cuda.error->to_string();
  EXPECT_NE(s.report.reasons().find("No visible GPU devices"), std::string::npos);

  // Without the dependency stage too, the ROCm plugin fails at the load stage with dlopen's message.
  o.dependencies = false;
  Selection loads = select_target({real("rocm7", deps_dir() / "files/rocm7_116/xla_rocm_plugin.so", ProbeKind::kRocm, 90)}, o);
  EXPECT_EQ(only(loads, "rocm7").failed_stage, Stage::kLoaded) << loads.report.to_text();
  EXPECT_NE(only(loads, "rocm7").error->message().find(".so"), std::string::npos);
}

TEST(RealPlugins, DoctorExaminesAllIsolated) {
  SelectOptions o = quiet_options();
  o.probes = false;
  o.examine_all = true;
  std::vector<Candidate> cs = real_machine_candidates();
  cs.push_back(real("cpu115", cpu_plugins()[2].path, ProbeKind::kNone, 5));
  Selection s = select_target(cs, o);
  EXPECT_FALSE(s.client);  // doctor starts nothing in its own process
  ASSERT_TRUE(s.report.chosen) << s.report.to_text();
  if (!machine_has_gpu()) {
    EXPECT_EQ(s.report.chosen_report()->candidate.name, "cpu");
  }
  EXPECT_EQ(only(s, "cpu115").verdict, Verdict::kUsable) << s.report.to_text();
  for (const auto& c : s.report.candidates)
    if (c.reached() >= Stage::kDependencies) {
      EXPECT_TRUE(c.isolated) << c.candidate.name;
    }
}

// Two CPU plugins (PJRT 0.81 and 0.115) from one bundle, in one process, running the same program at
// once: the same results.
TEST(RealPlugins, TwoCpuPluginsFromOneBundleRunConcurrently) {
  auto dir = temp_dir("two_cpu");
  std::vector<bundle::TargetSource> sources(2);
  sources[0].name = "cpu081";
  sources[0].file = cpu_plugins()[0].path;
  sources[1].name = "cpu115";
  sources[1].file = cpu_plugins()[2].path;
  auto manifest = bundle::write_bundle(dir, sources);
  PB_ASSERT_OK(manifest);
  auto read = bundle::read_manifest(dir);
  PB_ASSERT_OK(read);
  EXPECT_EQ(read->targets[0].pjrt_api.value_or(""), "0.81");
  EXPECT_EQ(read->targets[1].pjrt_api.value_or(""), "0.115");
  std::vector<Candidate> cs = bundle::bundle_candidates(dir, *read);
  std::vector<std::shared_ptr<Client>> clients;
  for (const char* name : {"cpu081", "cpu115"}) {
    SelectOptions o = quiet_options();
    o.target = name;
    Selection s = select_target(cs, o);
    ASSERT_TRUE(s.client) << s.report.to_text();
    clients.push_back(s.client);
  }
  EXPECT_NE(&clients[0]->plugin(), &clients[1]->plugin());
  std::vector<float> a(4), b(4);
  for (int i = 0; i < 4; ++i) a[i] = 0.5f * i, b[i] = 10.0f - i;
  std::vector<std::vector<float>> results(2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      auto exe = clients[k]->compile(*Program::from_bytes(plugboard::testing::kAddF32x4, "add"));
      if (!exe) return;
      const int64_t dims[] = {4};
      for (int round = 0; round < 50; ++round) {
        auto x = clients[k]->buffer_from_host(std::as_bytes(std::span(a)), DType::kF32, dims);
        auto y = clients[k]->buffer_from_host(std::as_bytes(std::span(b)), DType::kF32, dims);
        if (!x || !y) return;
        std::vector<Buffer*> args = {&*x, &*y};
        auto out = (*exe)->execute(args);
        if (!out) return;
        auto host = (*out)[0].to_host();
        if (!host) return;
        results[k].assign(reinterpret_cast<const float*>(host->data()), reinterpret_cast<const float*>(host->data()) + 4);
      }
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(results[0].size(), 4u);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0][3], 1.5f + 7.0f);
}

}  // namespace
}  // namespace plugboard::select
