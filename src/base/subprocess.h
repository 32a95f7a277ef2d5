// The one way plugboard runs another program: posix_spawn with an argv (no shell), stdin on /dev/null,
// optionally in a process group of its own and with default signals, optionally with stdout and stderr
// on pipes (one for both, or one each) that are read against a deadline. A child is always reaped: the owner waits for it (to a
// deadline), kills it (its whole group when it has one) and reaps it; a Subprocess destroyed before
// that kills and reaps it itself. Its exit status is a value (ExitStatus).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace plugboard {

// Where the child's stdout and stderr go.
enum class Capture {
  kNone,      // this process's own stdout and stderr
  kCombined,  // one pipe for both, read as "stdout" (what a message shows of a tool's output)
  kSeparate,  // a pipe each
};

struct SpawnOptions {
  std::vector<std::string> argv;                // argv[0] is the program (a path, or a name with search_path)
  std::optional<std::vector<std::string>> env;  // "NAME=value" entries; nullopt: this process's environment
  bool search_path = false;                     // argv[0] is looked up in PATH (posix_spawnp)
  // The child leads a process group of its own: kill() then ends whatever it started too.
  bool new_process_group = false;
  // An empty signal mask and SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT at their default, whatever this
  // process blocks or ignores (nohup).
  bool default_signals = false;
  Capture capture = Capture::kNone;  // read with read_until / read_output_until
};

// How a child ended, from its waitpid status.
class ExitStatus {
 public:
  explicit ExitStatus(int wait_status) : status_(wait_status) {}
  int wait_status() const { return status_; }
  bool exited() const;   // by exit(), with exit_code()
  int exit_code() const;
  bool signaled() const;  // by a signal, term_signal()
  int term_signal() const;
  bool success() const { return exited() && exit_code() == 0; }
  // "exited with status 3", "was killed by signal 9".
  std::string describe() const;

 private:
  int status_;
};

class Subprocess {
 public:
  // Starts the child. A program that cannot be started is errno_error("cannot start <argv[0]>") (base/
  // errno_error.h): NOT_FOUND for a missing program, PERMISSION_DENIED for one that is not executable.
  static Expected<Subprocess> spawn(const SpawnOptions& options);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&&) = delete;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();  // kills (the group) and reaps a child not reaped yet

  pid_t pid() const { return pid_; }

  // Passes what the child writes on its captured pipes to `on_stdout` / `on_stderr` (as it comes, in
  // chunks) until it has closed them all (true) or `deadline` passes (false).
  using OnOutput = std::function<void(std::string_view)>;
  bool read_until(Clock::time_point deadline, const OnOutput& on_stdout, const OnOutput& on_stderr = {});
  // read_until appending all output to `output`, of which only the last `keep_bytes` (about) are kept:
  // the tail is what messages show.
  bool read_output_until(Clock::time_point deadline, std::string& output, size_t keep_bytes = size_t{1} << 20);

  // True when the child exited by `deadline`. It is not reaped, so its pid (and group id) cannot be
  // reused before kill() and reap().
  bool wait_until(Clock::time_point deadline) const;

  // SIGKILL to the child's process group (new_process_group) or to the child alone. Before reap() only.
  void kill() const;

  // Waits for the child to end and reaps it; only once.
  ExitStatus reap();

 private:
  Subprocess(pid_t pid, bool group, UniqueFd out, UniqueFd err)
      : pid_(pid), group_(group), stdout_(std::move(out)), stderr_(std::move(err)) {}

  pid_t pid_ = -1;  // -1 once reaped or moved from
  bool group_ = false;
  UniqueFd stdout_, stderr_;  // the read ends of the captured pipes, closed at their end
};

}  // namespace plugboard
