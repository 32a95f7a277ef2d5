#include "select/isolate.h"

#include <unistd.h>

#include <cstring>
#include <optional>
#include <string_view>

#include "base/clock.h"
#include "base/environment.h"
#include "base/self_location.h"
#include "base/subprocess.h"
#include "select/isolate_protocol.h"

namespace plugboard::select {
namespace {
constexpr size_t kMaxLine = 1 << 20;

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// The last few lines the child wrote on stderr, for the report.
std::string last_words(const std::string& err) {
  if (err.empty()) return "";
  size_t start = err.size();
  for (int lines = 0; start > 0 && lines < 4; --start)
    if (err[start - 1] == '\n' && start != err.size()) ++lines;
  std::string tail = err.substr(start);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  if (tail.size() > 600) tail = "..." + tail.substr(tail.size() - 600);
  return tail.empty() ? "" : " (its last words on stderr: " + tail + ")";
}


}  // namespace

Expected<std::filesystem::path> find_isolation_helper() {
  std::vector<std::filesystem::path> tried;
  if (auto env = environment_override("PLUGBOARD_ISOLATE_HELPER")) tried.emplace_back(*env);
  // Installed: beside the executable (bin/), or in bin/ beside the library's lib/.
  const std::filesystem::path exe_dir = running_executable_folder();
  if (!exe_dir.empty()) tried.push_back(exe_dir / "plugboard-isolate");
  if (const auto code_dir = plugboard_code_folder(); !code_dir.empty() && code_dir != exe_dir)
    tried.push_back(code_dir.parent_path() / "bin" / "plugboard-isolate");
#ifdef PLUGBOARD_ISOLATE_HELPER_BUILT
  // The build tree's, for programs that run inside it (tests); an installed copy never reaches back.
  if (exe_dir.string().starts_with(PLUGBOARD_BUILD_DIR)) tried.emplace_back(PLUGBOARD_ISOLATE_HELPER_BUILT);
#endif
  std::string looked;
  for (const auto& p : tried) {
    if (::access(p.c_str(), X_OK) == 0) return p;
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  return make_error(Code::kNotFound, "the isolation helper plugboard-isolate was not found (looked in " + looked +
                                         "; set PLUGBOARD_ISOLATE_HELPER)");
}

namespace {

// The isolated child's stdout, line by line: its stage reports, kept in `outcome` as they come, and
// the stage it is in now (and since when) for a report of a child that dies or runs out of time.
class StageReader {
 public:
  StageReader(const Candidate& candidate, StartOutcome& outcome) : candidate_(candidate), outcome_(outcome) {}

  void take(std::string_view chunk) {
    buffer_.append(chunk);
    for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      take_line(line);
    }
    // A line longer than any stage report is not ours (a plugin writing on stdout): dropped.
    if (buffer_.size() > kMaxLine) buffer_.clear();
  }

  Stage next() const { return next_; }
  Clock::time_point stage_start() const { return stage_start_; }

 private:
  void take_line(const std::string& line) {
    auto decoded = isolate_protocol::decode_stage(line);
    if (!decoded) return;  // a plugin that prints on stdout: not ours
    outcome_.stages.push_back(decoded->stage);
    if (!decoded->stage.passed) {
      outcome_.failed_stage = decoded->stage.stage;
      outcome_.error = decoded->error ? *decoded->error
                                      : Error(Code::kUnknown, candidate_.path.string() + ": the isolated start-up reported the " +
                                                                  stage_name(decoded->stage.stage) + " stage failed without a reason");
    } else if (decoded->stage.stage != Stage::kDevices) {
      next_ = static_cast<Stage>(static_cast<int>(decoded->stage.stage) + 1);
    }
    stage_start_ = Clock::now();
  }

  const Candidate& candidate_;
  StartOutcome& outcome_;
  std::string buffer_;
  Stage next_ = Stage::kLoaded;  // the stage the child is in
  Clock::time_point stage_start_ = Clock::now();
};

// The last 64 KiB (about) of the child's stderr, for last_words.
void keep_stderr_tail(std::string& err, std::string_view chunk) {
  err.append(chunk);
  if (err.size() > 64 * 1024) err.erase(0, err.size() - 16 * 1024);
}

// Why a child that reported no failure did not finish every stage: it ran out of time, died of a
// signal, or exited early. nullopt when it finished.
std::optional<Error> unfinished(const Candidate& candidate, const StartOutcome& outcome, Stage next, bool timed_out,
                                const ExitStatus& status, const IsolationOptions& options, const std::string& err) {
  const std::string file = candidate.path.string();
  if (timed_out)
    return Error(Code::kDeadlineExceeded, file + ": " + stage_name(next) + " did not finish within " +
                                              std::to_string(options.timeout.count()) +
                                              " ms; the isolated start-up was killed" + last_words(err));
  if (status.signaled())
    return Error(Code::kAborted, file + ": the isolated start-up died of " + signal_text(status.term_signal()) +
                                     " during the " + stage_name(next) + " stage" + last_words(err));
  if (outcome.stages.empty() || outcome.stages.back().stage != Stage::kDevices)
    return Error(Code::kInternal, file + ": the isolated start-up exited with status " +
                                      std::to_string(status.exited() ? status.exit_code() : -1) + " during the " +
                                      stage_name(next) + " stage" + last_words(err));
  return std::nullopt;
}

}  // namespace

StartOutcome start_isolated(const Candidate& candidate, const IsolationOptions& options) {
  StartOutcome out;
  auto fail = [&](Stage stage, double ms, Error e) {
    out.stages.push_back({stage, false, ms, ""});
    out.failed_stage = stage;
    out.error = std::move(e);
    return std::move(out);
  };
  const std::string doing = "isolating the start-up of " + candidate.path.string();
  Expected<std::filesystem::path> helper =
      options.helper.empty() ? find_isolation_helper() : Expected<std::filesystem::path>(options.helper);
  if (!helper) return fail(Stage::kLoaded, 0, Error(helper.error()).annotate(doing));

  const auto t0 = Clock::now();
  auto child = Subprocess::spawn(
      {.argv = {helper->string(), isolate_protocol::encode_candidate(candidate)}, .capture = Capture::kSeparate});
  if (!child)
    return fail(Stage::kLoaded, 0,
                Error(Code::kInternal, "cannot start the isolation helper " + helper->string() + ": " +
                                           child.error().message()));

  // Read both pipes until the child closes them or the time is up.
  StageReader reader(candidate, out);
  std::string err;
  const bool timed_out = !child->read_until(
      t0 + options.timeout, [&](std::string_view chunk) { reader.take(chunk); },
      [&](std::string_view chunk) { keep_stderr_tail(err, chunk); });
  if (timed_out) child->kill();
  const ExitStatus status = child->reap();
  const double ms = ms_since(reader.stage_start());
  if (out.failed_stage) return out;
  if (auto why = unfinished(candidate, out, reader.next(), timed_out, status, options, err))
    return fail(reader.next(), ms, std::move(*why));
  return out;
}

}  // namespace plugboard::select
