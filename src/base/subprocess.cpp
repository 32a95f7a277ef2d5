// Subprocess: posix_spawn(p) with file actions and attributes held by RAII wrappers; a pidfd (when the
// kernel has it) to wait for exit against a deadline, polling waitid(WNOWAIT) otherwise.
#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

#include "base/errno_error.h"

extern char** environ;

namespace plugboard {
namespace {

struct FileActions {
  posix_spawn_file_actions_t actions;
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};

struct Attributes {
  posix_spawnattr_t attr;
  Attributes() { posix_spawnattr_init(&attr); }
  ~Attributes() { posix_spawnattr_destroy(&attr); }
  Attributes(const Attributes&) = delete;
  Attributes& operator=(const Attributes&) = delete;
};

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Milliseconds left to `deadline` for poll: 0 when past, at most about 12 days.
int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

Status make_pipe(UniqueFd& read_end, UniqueFd& write_end, const std::string& program) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno_error(errno, "cannot create a pipe for " + program);
  read_end.reset(fds[0]);
  write_end.reset(fds[1]);
  return ok();
}

// Whether `pid` has exited, without reaping it.
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | WNOHANG) == 0 && info.si_pid == pid;
}

}  // namespace

bool ExitStatus::exited() const { return WIFEXITED(status_); }
int ExitStatus::exit_code() const { return WEXITSTATUS(status_); }
bool ExitStatus::signaled() const { return WIFSIGNALED(status_); }
int ExitStatus::term_signal() const { return WTERMSIG(status_); }

std::string ExitStatus::describe() const {
  if (signaled()) return "was killed by signal " + std::to_string(term_signal());
  return "exited with status " + std::to_string(exit_code());
}

Expected<Subprocess> Subprocess::spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return invalid_argument("cannot start a program: no argv");
  std::vector<std::string> argv = options.argv;
  std::vector<char*> args = pointers(argv);
  std::vector<std::string> env_strings = options.env.value_or(std::vector<std::string>{});
  std::vector<char*> env = pointers(env_strings);

  FileActions files;
  // A child that reads the terminal from a background group would be stopped (SIGTTIN) until killed.
  posix_spawn_file_actions_addopen(&files.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // The write ends are the child's: closed here once it has them.
  UniqueFd out_read, out_write, err_read, err_write;
  if (options.capture != Capture::kNone) {
    PB_RETURN_IF_ERROR(make_pipe(out_read, out_write, argv[0]));
    posix_spawn_file_actions_adddup2(&files.actions, out_write.get(), STDOUT_FILENO);
  }
  if (options.capture == Capture::kCombined) posix_spawn_file_actions_adddup2(&files.actions, out_write.get(), STDERR_FILENO);
  if (options.capture == Capture::kSeparate) {
    PB_RETURN_IF_ERROR(make_pipe(err_read, err_write, argv[0]));
    posix_spawn_file_actions_adddup2(&files.actions, err_write.get(), STDERR_FILENO);
  }
  Attributes attributes;
  short flags = 0;
  if (options.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attributes.attr, 0);
  }
  if (options.default_signals) {
    flags |= POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes.attr, &none);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attributes.attr, &defaults);
  }
  posix_spawnattr_setflags(&attributes.attr, flags);

  pid_t pid = -1;
  char* const* envp = options.env ? env.data() : environ;
  const int rc = options.search_path ? ::posix_spawnp(&pid, args[0], &files.actions, &attributes.attr, args.data(), envp)
                                     : ::posix_spawn(&pid, args[0], &files.actions, &attributes.attr, args.data(), envp);
  if (rc != 0) return errno_error(rc, "cannot start " + argv[0]);
  return Subprocess(pid, options.new_process_group, std::move(out_read), std::move(err_read));
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      group_(other.group_),
      stdout_(std::move(other.stdout_)),
      stderr_(std::move(other.stderr_)) {}

Subprocess::~Subprocess() {
  if (pid_ < 0) return;
  kill();
  reap();
}

bool Subprocess::read_until(Clock::time_point deadline, const OnOutput& on_stdout, const OnOutput& on_stderr) {
  UniqueFd* pipes[2] = {&stdout_, &stderr_};
  const OnOutput* handlers[2] = {&on_stdout, &on_stderr};
  char buf[4096];
  while (stdout_ || stderr_) {
    if (Clock::now() >= deadline) return false;
    pollfd fds[2] = {{stdout_ ? stdout_.get() : -1, POLLIN, 0}, {stderr_ ? stderr_.get() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, std::min(poll_ms(deadline), 1000));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        pipes[i]->reset();  // closed by the child (or unreadable): its end
        continue;
      }
      if (*handlers[i]) (*handlers[i])(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  stdout_.reset();
  stderr_.reset();
  return true;
}

bool Subprocess::read_output_until(Clock::time_point deadline, std::string& output, size_t keep_bytes) {
  const OnOutput keep_tail = [&](std::string_view chunk) {
    output.append(chunk);
    if (output.size() > keep_bytes) output.erase(0, output.size() - keep_bytes / 2);
  };
  return read_until(deadline, keep_tail, keep_tail);
}

bool Subprocess::wait_until(Clock::time_point deadline) const {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
  if (pidfd) {
    for (;;) {
      pollfd p{pidfd.get(), POLLIN, 0};
      const int rc = ::poll(&p, 1, poll_ms(deadline));
      if (rc > 0) return true;
      if (rc == 0) return has_exited(pid_);  // the deadline passed
      if (errno != EINTR) break;
    }
  }
  // No pidfd (an old kernel), or poll failed: look every few milliseconds.
  for (auto pause = std::chrono::microseconds(100);; pause = std::min(pause * 2, std::chrono::microseconds(10000))) {
    if (has_exited(pid_)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
  }
}

void Subprocess::kill() const {
  if (pid_ > 0) ::kill(group_ ? -pid_ : pid_, SIGKILL);
}

ExitStatus Subprocess::reap() {
  int status = 0;
  while (pid_ > 0 && ::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  stdout_.reset();
  stderr_.reset();
  return ExitStatus(status);
}

}  // namespace plugboard
