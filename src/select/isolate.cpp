#include "select/isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/environment.h"
#include "base/unique_fd.h"
#include "select/isolate_protocol.h"

extern char** environ;

namespace plugboard::select {
namespace {
constexpr size_t kMaxLine = 1 << 20;

Status make_pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return make_error(Code::kResourceExhausted, std::string("pipe: ") + std::strerror(errno));
  read_end = UniqueFd(fds[0]);
  write_end = UniqueFd(fds[1]);
  return ok();
}

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

std::filesystem::path self_dir() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
}

}  // namespace

Expected<std::filesystem::path> find_isolation_helper() {
  std::vector<std::filesystem::path> tried;
  if (auto env = environment_override("PLUGBOARD_ISOLATE_HELPER")) tried.emplace_back(*env);
  tried.push_back(self_dir() / "plugboard-isolate");
#ifdef PLUGBOARD_ISOLATE_HELPER_BUILT
  tried.emplace_back(PLUGBOARD_ISOLATE_HELPER_BUILT);
#endif
  std::string looked;
  for (const auto& p : tried) {
    if (::access(p.c_str(), X_OK) == 0) return p;
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  return make_error(Code::kNotFound, "the isolation helper plugboard-isolate was not found (looked in " + looked +
                                         "; set PLUGBOARD_ISOLATE_HELPER)");
}

StartOutcome start_isolated(const Candidate& candidate, const IsolationOptions& options) {
  StartOutcome out;
  auto fail = [&](Stage stage, double ms, Error e) {
    out.stages.push_back({stage, false, ms, ""});
    out.failed_stage = stage;
    out.error = std::move(e);
    return std::move(out);
  };
  Expected<std::filesystem::path> helper =
      options.helper.empty() ? find_isolation_helper() : Expected<std::filesystem::path>(options.helper);
  if (!helper) return fail(Stage::kLoaded, 0, Error(helper.error()).annotate("isolating the start-up of " + candidate.path.string()));

  UniqueFd out_r, out_w, err_r, err_w;
  const std::string doing = "isolating the start-up of " + candidate.path.string();
  if (auto s = make_pipe(out_r, out_w); !s) return fail(Stage::kLoaded, 0, s.error().annotate(doing));
  if (auto s = make_pipe(err_r, err_w); !s) return fail(Stage::kLoaded, 0, s.error().annotate(doing));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  const std::string helper_path = helper->string();
  const std::string arg = isolate_protocol::encode_candidate(candidate);
  char* argv[] = {const_cast<char*>(helper_path.c_str()), const_cast<char*>(arg.c_str()), nullptr};
  pid_t pid = -1;
  const auto t0 = Clock::now();
  int rc = ::posix_spawn(&pid, helper_path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  out_w.reset();
  err_w.reset();
  if (rc != 0)
    return fail(Stage::kLoaded, 0, Error(Code::kInternal, "cannot start the isolation helper " + helper_path + ": " + std::strerror(rc)));

  // Read both pipes until the child closes them or the time is up.
  std::string out_buf, err_buf;
  Stage next = Stage::kLoaded;  // the stage the child is in
  auto stage_start = Clock::now();
  bool timed_out = false;
  bool out_open = true, err_open = true;
  auto take_lines = [&] {
    for (size_t nl; (nl = out_buf.find('\n')) != std::string::npos;) {
      std::string line = out_buf.substr(0, nl);
      out_buf.erase(0, nl + 1);
      auto decoded = isolate_protocol::decode_stage(line);
      if (!decoded) continue;  // a plugin that prints on stdout: not ours
      out.stages.push_back(decoded->stage);
      if (!decoded->stage.passed) {
        out.failed_stage = decoded->stage.stage;
        out.error = decoded->error ? *decoded->error
                                   : Error(Code::kUnknown, candidate.path.string() + ": the isolated start-up reported the " +
                                                               stage_name(decoded->stage.stage) + " stage failed without a reason");
      } else if (decoded->stage.stage != Stage::kDevices) {
        next = static_cast<Stage>(static_cast<int>(decoded->stage.stage) + 1);
      }
      stage_start = Clock::now();
    }
  };
  while (out_open || err_open) {
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    if (elapsed >= options.timeout) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_r.get() : -1, POLLIN, 0}, {err_open ? err_r.get() : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>((options.timeout - elapsed).count()));
    if (n < 0 && errno == EINTR) continue;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      if (i == 0) {
        out_buf.append(buf, static_cast<size_t>(got));
        take_lines();
        // A line longer than any stage report is not ours (a plugin writing on stdout): dropped.
        if (out_buf.size() > kMaxLine) out_buf.clear();
      } else {
        err_buf.append(buf, static_cast<size_t>(got));
        if (err_buf.size() > 64 * 1024) err_buf.erase(0, err_buf.size() - 16 * 1024);
      }
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double ms = ms_since(stage_start);
  if (out.failed_stage) return out;
  if (timed_out)
    return fail(next, ms, Error(Code::kDeadlineExceeded, candidate.path.string() + ": " + stage_name(next) +
                                                          " did not finish within " + std::to_string(options.timeout.count()) +
                                                          " ms; the isolated start-up was killed" + last_words(err_buf)));
  if (WIFSIGNALED(status))
    return fail(next, ms, Error(Code::kAborted, candidate.path.string() + ": the isolated start-up died of " +
                                                     signal_text(WTERMSIG(status)) + " during the " + stage_name(next) +
                                                     " stage" + last_words(err_buf)));
  if (out.stages.empty() || out.stages.back().stage != Stage::kDevices)
    return fail(next, ms, Error(Code::kInternal, candidate.path.string() + ": the isolated start-up exited with status " +
                                                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                                                      " during the " + stage_name(next) + " stage" + last_words(err_buf)));
  return out;
}

}  // namespace plugboard::select
