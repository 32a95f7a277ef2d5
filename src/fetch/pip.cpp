// pip_download: posix_spawnp with stdout and stderr on a pipe, read (with poll, against a deadline) to
// the end, then waitpid; past the deadline the process group is killed.
#include "fetch/pip.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/sha256.h"
#include "fetch/package_spec.h"

extern char** environ;

namespace plugboard::fetch {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
};

struct SpawnAttributes {
  posix_spawnattr_t attr;
  SpawnAttributes() { posix_spawnattr_init(&attr); }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attr); }
};

// The last `max` characters, starting at a line.
std::string tail(const std::string& text, size_t max) {
  std::string out = text;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.size() <= max) return out;
  out = out.substr(out.size() - max);
  const size_t nl = out.find('\n');
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

}  // namespace

Expected<std::filesystem::path> pip_download(const PackageSpec& spec, const std::optional<std::string>& wheel_sha256,
                                             const FetchOptions& options, const std::filesystem::path& dir) {
  PB_RETURN_IF_ERROR(check_package_spec(spec));
  const std::string requirement = spec.to_string();
  const std::string& python = options.python;
  std::vector<std::string> args = {python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                   "--disable-pip-version-check", "-q", "--timeout",
                                   std::to_string(options.pip_timeout_s), "-d", dir.string()};
  if (wheel_sha256) {
    if (!is_sha256_hex(*wheel_sha256)) return invalid_argument(requirement + ": \"" + *wheel_sha256 + "\" is not a sha256");
    const std::filesystem::path requirements = dir / "plugboard-requirements.txt";
    std::ofstream(requirements) << requirement << " --hash=sha256:" << *wheel_sha256 << "\n";
    args.insert(args.end(), {"--require-hashes", "-r", requirements.string()});
  } else {
    args.insert(args.end(), {"--", requirement});
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return make_error(Code::kInternal, std::string("cannot create a pipe for pip: ") + std::strerror(errno));
  Fd read_end{fds[0]}, write_end{fds[1]};
  SpawnActions sa;
  posix_spawn_file_actions_addopen(&sa.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&sa.actions, write_end.fd, 1);
  posix_spawn_file_actions_adddup2(&sa.actions, write_end.fd, 2);
  // Its own process group, so that a time-out kills pip and whatever it started.
  SpawnAttributes attributes;
  posix_spawnattr_setflags(&attributes.attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes.attr, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, python.c_str(), &sa.actions, &attributes.attr, argv.data(), environ);
  if (rc != 0)
    return make_error(rc == ENOENT ? Code::kNotFound : Code::kFailedPrecondition,
                      "cannot run the Python interpreter \"" + python + "\" to download " + requirement +
                          " with pip: " + std::strerror(rc));
  write_end.reset();

  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + options.pip_time_limit;
  std::string output;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{read_end.fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) continue;
    const ssize_t n = ::read(read_end.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (output.size() < (size_t{1} << 20)) output.append(buf, static_cast<size_t>(n));  // the tail is what is shown
    else output = output.substr(output.size() / 2) + std::string(buf, static_cast<size_t>(n));
  }
  // Output closed: pip is exiting (or closed its output and went on): wait for it, to the same deadline.
  int status = 0;
  while (!timed_out) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) timed_out = true;
    else ::usleep(10000);
  }
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  const std::string command = python + " -m pip download " + requirement;
  if (timed_out) {
    const auto ms = options.pip_time_limit.count();
    return make_error(Code::kDeadlineExceeded,
                      command + " did not finish within " +
                          (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms") +
                          ": killed" + (output.empty() ? std::string() : " (its last output: " + tail(output, 2000) + ")"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                              : "was killed by signal " + std::to_string(WTERMSIG(status));
    const bool not_found = output.find("No matching distribution") != std::string::npos;
    return make_error(not_found ? Code::kNotFound : Code::kUnavailable,
                      "pip could not download " + requirement + " (" + command + " " + how + "): " + tail(output, 2000));
  }
  std::vector<std::filesystem::path> wheels;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (wheel_is_for(e.path().filename().string(), spec)) wheels.push_back(e.path());
  if (wheels.size() != 1)
    return make_error(Code::kInternal, command + " succeeded but left " + std::to_string(wheels.size()) +
                                           " wheels of " + requirement + " in " + dir.string() + " (expected one)");
  return wheels.front();
}

}  // namespace plugboard::fetch
