// pip_download: pip as a Subprocess (base/subprocess.h) in its own process group, its output read to
// the end against a deadline, then waited for; past the deadline the process group is killed.
#include "fetch/pip.h"

#include <fstream>
#include <vector>

#include "base/sha256.h"
#include "base/subprocess.h"
#include "fetch/package_spec.h"

namespace plugboard::fetch {
namespace {

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
  // Its own process group, so that a time-out kills pip and whatever it started.
  auto child = Subprocess::spawn(
      {.argv = std::move(args), .search_path = true, .new_process_group = true, .capture = Capture::kCombined});
  if (!child)
    return make_error(child.error().code() == Code::kNotFound ? Code::kNotFound : Code::kFailedPrecondition,
                      "cannot run the Python interpreter \"" + python + "\" to download " + requirement +
                          " with pip: " + child.error().message());

  const Clock::time_point deadline = Clock::now() + options.pip_time_limit;
  std::string output;
  // Output closed: pip is exiting (or closed its output and went on): wait for it, to the same deadline.
  const bool timed_out = !child->read_output_until(deadline, output) || !child->wait_until(deadline);
  if (timed_out) child->kill();
  const ExitStatus status = child->reap();
  const std::string command = python + " -m pip download " + requirement;
  if (timed_out) {
    const auto ms = options.pip_time_limit.count();
    return make_error(Code::kDeadlineExceeded,
                      command + " did not finish within " +
                          (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms") +
                          ": killed" + (output.empty() ? std::string() : " (its last output: " + tail(output, 2000) + ")"));
  }
  if (!status.success()) {
    const std::string how = status.describe();
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
