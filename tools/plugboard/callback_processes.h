// The processes and temporary folders `plugboard run` makes for --callback commands, and their end on
// every path out:
//  - each command runs in a process group of its own, with a time limit: past it, the whole group is
//    killed (SIGKILL) and the call fails; when the command exits, whatever it left running in its
//    group is killed too, so no callback process outlives its call;
//  - each call's files live in a temporary folder that is removed when the call ends (success,
//    failure, time-out);
//  - SIGINT, SIGTERM and SIGHUP to plugboard (the ones not ignored when it started) kill every running
//    command's group and remove every folder, then end plugboard with that signal, as if unhandled.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/subprocess.h"

namespace plugboard::cli {

// Installs the signal handling described above, once per process (later calls do nothing).
void install_callback_signal_handlers();

// A temporary folder for one call's files (plugboard-callback-XXXXXX under $TMPDIR), removed on
// destruction, or by the signal handling if plugboard is stopped first.
class CallbackScratch {
 public:
  static Expected<CallbackScratch> create();
  CallbackScratch(CallbackScratch&& o) noexcept;
  CallbackScratch& operator=(CallbackScratch&&) = delete;
  CallbackScratch(const CallbackScratch&) = delete;
  CallbackScratch& operator=(const CallbackScratch&) = delete;
  ~CallbackScratch();
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit CallbackScratch(std::filesystem::path p) : path_(std::move(p)) {}
  std::filesystem::path path_;
};

// Runs argv[0] with `argv` and `envp` in a new process group and waits for it, at most `timeout`.
// Returns how it ended. DEADLINE_EXCEEDED when the time ran out (the group was killed and the command
// reaped). Errors start with `what` ("--callback NAME: `COMMAND`").
Expected<ExitStatus> run_process_group(const std::string& what, std::vector<std::string> argv,
                                       std::vector<std::string> envp, std::chrono::milliseconds timeout);

}  // namespace plugboard::cli
