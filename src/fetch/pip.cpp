// pip_download: posix_spawnp with stdout and stderr on a pipe, read to the end, then waitpid.
#include "fetch/pip.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

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

Expected<std::filesystem::path> pip_download(const PackageSpec& spec, const std::string& python,
                                             const std::filesystem::path& dir) {
  const std::string requirement = spec.to_string();
  std::vector<std::string> args = {python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                   "--disable-pip-version-check", "-q", requirement, "-d", dir.string()};
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
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, python.c_str(), &sa.actions, nullptr, argv.data(), environ);
  if (rc != 0)
    return make_error(rc == ENOENT ? Code::kNotFound : Code::kFailedPrecondition,
                      "cannot run the Python interpreter \"" + python + "\" to download " + requirement +
                          " with pip: " + std::strerror(rc));
  write_end.reset();

  std::string output;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(read_end.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string command = python + " -m pip download " + requirement;
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
