#include "run_callbacks.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "io/array_format.h"
#include "io/npy.h"

extern char** environ;

namespace plugboard::cli {
namespace {

// A temporary folder for one call's files, removed afterwards.
struct CallFolder {
  std::filesystem::path path;
  explicit CallFolder(std::filesystem::path p) : path(std::move(p)) {}
  CallFolder(CallFolder&& o) noexcept : path(std::move(o.path)) { o.path.clear(); }
  CallFolder(const CallFolder&) = delete;
  CallFolder& operator=(const CallFolder&) = delete;
  ~CallFolder() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

Expected<CallFolder> make_call_folder() {
  std::error_code ec;
  auto base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / "plugboard-callback-XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    return make_error(Code::kPermissionDenied, "cannot create a folder for callback files under " + base.string() + ": " +
                                                   std::strerror(errno));
  return CallFolder(tmpl);
}

io::HostArray to_array(const TensorView& v) {
  io::HostArray a;
  a.dtype = v.dtype;
  a.dims.assign(v.dims.begin(), v.dims.end());
  a.data.assign(v.bytes.begin(), v.bytes.end());
  return a;
}

Status run_command(const std::string& name, const std::string& command, const BlockingCall& call) {
  PB_ASSIGN_OR_RETURN(CallFolder folder, make_call_folder());
  // The files go to COMMAND as arguments, unless it places them itself ($1.., $@, $*).
  bool places_them = false;
  for (size_t i = command.find('$'); i != std::string::npos && i + 1 < command.size(); i = command.find('$', i + 1)) {
    const char c = command[i + 1];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '@' || c == '*') places_them = true;
  }
  std::vector<std::string> argv_strings = {"/bin/sh", "-c", places_them ? command : command + " \"$@\"",
                                           "plugboard-callback"};
  for (size_t i = 0; i < call.operands().size(); ++i) {
    auto path = folder.path / ("in" + std::to_string(i) + ".npy");
    PB_RETURN_IF_ERROR(io::write_npy(path, to_array(call.operands()[i])));
    argv_strings.push_back(path.string());
  }
  std::vector<std::filesystem::path> outputs;
  for (size_t i = 0; i < call.results().size(); ++i) {
    outputs.push_back(folder.path / ("out" + std::to_string(i) + ".npy"));
    argv_strings.push_back(outputs.back().string());
  }
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  // The child's environment: ours, plus which callback this is.
  std::vector<std::string> env_strings = {"PLUGBOARD_CALLBACK=" + name};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PLUGBOARD_CALLBACK=", 19) != 0) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  pid_t pid;
  if (int rc = posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), envp.data()); rc != 0)
    return make_error(Code::kInternal, "--callback " + name + ": cannot start /bin/sh: " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return make_error(Code::kAborted, "--callback " + name + ": `" + command + "` was killed by signal " +
                                          std::to_string(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return make_error(Code::kAborted, "--callback " + name + ": `" + command + "` exited with status " +
                                          std::to_string(WEXITSTATUS(status)));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const MutableTensorView& want = call.results()[i];
    // The descr decides, except for the types .npy stores as raw bits (bf16, f8): then the program's.
    const bool raw_bits = want.dtype == DType::kBF16 || want.dtype == DType::kF8E5M2 || want.dtype == DType::kF8E4M3FN;
    auto result = io::read_npy(outputs[i], raw_bits ? std::optional<DType>(want.dtype) : std::nullopt);
    if (!result)
      return std::unexpected(std::move(result).error().annotate("--callback " + name + ": reading result " +
                                                                std::to_string(i) + " that `" + command +
                                                                "` was to write"));
    PB_RETURN_IF_ERROR(call.set_result(i, *result));
  }
  return ok();
}

}  // namespace

namespace {

// Nested brackets, one level per dimension, stopping with "..." after `limit` elements.
void format_nested(const io::HostArray& a, size_t dim, size_t& flat, size_t limit, std::string& out) {
  if (dim == a.dims.size()) {
    out += io::format_element(a, flat++);
    return;
  }
  out += '[';
  for (int64_t i = 0; i < a.dims[dim]; ++i) {
    if (i > 0) out += ", ";
    if (flat >= limit) {
      out += "...";
      break;
    }
    format_nested(a, dim + 1, flat, limit, out);
  }
  out += ']';
}

}  // namespace

std::string format_printed(const std::string& label, const io::HostArray& value, size_t limit) {
  std::string out = label.empty() ? "" : label + ": ";
  out += shape_string(value.dtype, value.dims) + " ";
  size_t flat = 0;
  format_nested(value, 0, flat, limit, out);
  return out;
}

Expected<std::shared_ptr<HostCallbacks>> make_run_callbacks(const RunCallbackOptions& options) {
  auto receiver = std::make_shared<HostCallbacks>();
  const size_t limit = options.print_limit;
  std::FILE* to = options.print_to;
  PB_RETURN_IF_ERROR(receiver->add_ordered(kPrintTarget, [limit, to](const OrderedCall& call) -> Status {
    std::string label;
    if (const AttributeValue* l = call.attribute("label")) label = attribute_to_string(*l);
    for (size_t i = 0; i < call.operands.size(); ++i) {
      std::string name = label;
      if (call.operands.size() > 1) name += (name.empty() ? "" : " ") + std::string("#") + std::to_string(i);
      std::fprintf(to, "%s\n", format_printed(name, call.operands[i], limit).c_str());
    }
    std::fflush(to);
    return ok();
  }));
  for (const std::string& spec : options.commands) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return invalid_argument("--callback '" + spec + "': expected NAME=COMMAND");
    std::string name = spec.substr(0, eq), command = spec.substr(eq + 1);
    if (name == kPrintTarget) return invalid_argument("--callback " + name + ": that name is the print hook's");
    PB_RETURN_IF_ERROR(annotate(receiver->add_blocking(name,
                                                       [name, command](const BlockingCall& call) {
                                                         return run_command(name, command, call);
                                                       }),
                                "--callback " + spec));
  }
  return receiver;
}

}  // namespace plugboard::cli
