#include "callback_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace plugboard::cli {
namespace {

// What is alive now: the process groups of running commands and the call folders. Never destroyed:
// the signal thread may use it while the process exits.
struct Registry {
  std::mutex mutex;
  std::set<pid_t> groups;
  std::set<std::string> folders;
  std::atomic<bool> terminating{false};  // a signal is ending plugboard: nothing new may start
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// A thread whose work is cut short by the ending process waits here for the end: returning would let
// the run report a failure (exit 1) before the signal's own status.
[[noreturn]] void wait_for_the_end() {
  for (;;) pause();
}

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  if (::write(g_signal_pipe[1], &b, 1) < 0) {
    // Nothing a handler can do; the watcher will not run, the signal is lost.
  }
  errno = saved;
}

// Waits (a bounded time) until `pid` has exited, without reaping it: its waiter reaps it.
void wait_exited(pid_t pid) {
  for (int i = 0; i < 400; ++i) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | WNOHANG) != 0) return;  // reaped already
    if (info.si_pid == pid) return;
    ::usleep(5000);
  }
}

// The signal thread: kills and removes everything, then lets the signal end the process.
void watch_signals() {
  unsigned char b = 0;
  for (;;) {
    const ssize_t n = ::read(g_signal_pipe[0], &b, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return;  // the pipe is gone: nothing to watch
  }
  const int sig = b;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    r.terminating = true;
    for (pid_t g : r.groups) ::kill(-g, SIGKILL);
    for (pid_t g : r.groups) wait_exited(g);
    for (const std::string& f : r.folders) {
      std::error_code ec;
      std::filesystem::remove_all(f, ec);
    }
    r.folders.clear();
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  std::_Exit(128 + sig);  // only if the signal did not end the process
}

std::string seconds_text(std::chrono::milliseconds t) {
  char s[32];
  std::snprintf(s, sizeof(s), "%g", static_cast<double>(t.count()) / 1000.0);
  return s;
}

}  // namespace

void install_callback_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;  // no handlers: signals keep their default
    // The handler must never block, however many signals arrive before the watcher reads them.
    ::fcntl(g_signal_pipe[1], F_SETFL, ::fcntl(g_signal_pipe[1], F_GETFL) | O_NONBLOCK);
    std::thread(watch_signals).detach();
    for (int sig : kSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup and kin
      struct sigaction sa {};
      sa.sa_handler = on_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

Expected<CallbackScratch> CallbackScratch::create() {
  std::error_code ec;
  auto base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / "plugboard-callback-XXXXXX").string();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.terminating) wait_for_the_end();
  if (!::mkdtemp(tmpl.data()))
    return make_error(Code::kPermissionDenied, "cannot create a folder for callback files under " + base.string() + ": " +
                                                   std::strerror(errno));
  r.folders.insert(tmpl);
  return CallbackScratch(tmpl);
}

CallbackScratch::CallbackScratch(CallbackScratch&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }

CallbackScratch::~CallbackScratch() {
  if (path_.empty()) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.terminating) wait_for_the_end();  // removed by the signal thread; the signal ends the process
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  r.folders.erase(path_.string());
}

Expected<ExitStatus> run_process_group(const std::string& what, std::vector<std::string> argv,
                                       std::vector<std::string> envp, std::chrono::milliseconds timeout) {
  // A group of its own, led by the command's shell; signals plugboard's caller may have ignored (nohup)
  // are the command's default again; stdin is /dev/null (a group that is not the terminal's foreground
  // group is stopped when it reads the terminal, and would sit there until the timeout).
  SpawnOptions options{.argv = std::move(argv), .env = std::move(envp), .new_process_group = true, .default_signals = true};
  Registry& r = registry();
  std::optional<Subprocess> child;
  {
    // Under the lock: the signal thread either sees the group or stops the spawn.
    std::lock_guard lock(r.mutex);
    if (r.terminating) wait_for_the_end();
    auto spawned = Subprocess::spawn(options);
    if (!spawned)
      return make_error(Code::kInternal, what + ": " + spawned.error().message());
    child.emplace(std::move(*spawned));
    r.groups.insert(child->pid());
  }
  // From here on the group exists: nothing of it may outlive the call, whichever way it ends.
  const pid_t group = child->pid();
  const bool exited = child->wait_until(Clock::now() + timeout);
  // Whether it exited or ran out of time, nothing of its group outlives the call. The leader is not
  // reaped yet, so its pid (the group's id) cannot have been reused.
  child->kill();
  const ExitStatus status = child->reap();
  {
    std::lock_guard lock(r.mutex);
    r.groups.erase(group);
    if (r.terminating) wait_for_the_end();
  }
  if (!exited)
    return make_error(Code::kDeadlineExceeded, what + " did not finish within " + seconds_text(timeout) +
                                                   " s (--callback-timeout): its process group was killed");
  return status;
}

}  // namespace plugboard::cli
