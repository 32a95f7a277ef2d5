#include "run_callbacks.h"

#include <sys/wait.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/parse_number.h"
#include "base/regular_file.h"
#include "callback_processes.h"
#include "io/array_format.h"
#include "io/npy.h"

extern char** environ;

namespace plugboard::cli {
namespace {

io::HostArray to_array(const TensorView& v) {
  io::HostArray a;
  a.dtype = v.dtype;
  a.dims.assign(v.dims.begin(), v.dims.end());
  a.data.assign(v.bytes.begin(), v.bytes.end());
  return a;
}

// Room for the .npy header in front of a result's data: numpy's own headers are one 64-byte line;
// this leaves space for any rank, and caps a result file at its data plus this.
constexpr size_t kMaxNpyHeaderBytes = size_t{1} << 16;

// Reads result `index`, which the command wrote to `path`: a regular file (not a FIFO, a device or a
// link to one), at most the header plus the bytes the program's dtype and dims take.
Expected<io::HostArray> read_result(const std::filesystem::path& path, const MutableTensorView& want) {
  PB_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(path, want.bytes.size() + kMaxNpyHeaderBytes));
  // The descr decides, except for the types .npy stores as raw bits (bf16, f8): then the program's.
  const bool raw_bits = want.dtype == DType::kBF16 || want.dtype == DType::kF8E5M2 || want.dtype == DType::kF8E4M3FN;
  return io::parse_npy(std::as_bytes(std::span(bytes)), path.string(),
                       raw_bits ? std::optional<DType>(want.dtype) : std::nullopt);
}

// More than 0 and at most kMaxCallbackTimeoutSeconds; `shown` is the value as the message shows it.
Status check_callback_timeout(double seconds, const std::string& shown) {
  if (seconds > 0 && seconds <= kMaxCallbackTimeoutSeconds) return ok();
  return invalid_argument("--callback-timeout " + shown + ": must be more than 0 and at most " +
                          std::to_string(static_cast<int64_t>(kMaxCallbackTimeoutSeconds)) + " seconds");
}

Status run_command(const std::string& name, const std::string& command, std::chrono::milliseconds timeout,
                   const BlockingCall& call) {
  PB_ASSIGN_OR_RETURN(CallbackScratch folder, CallbackScratch::create());
  // The files go to COMMAND as arguments, unless it places them itself ($1.., $@, $*).
  bool places_them = false;
  for (size_t i = command.find('$'); i != std::string::npos && i + 1 < command.size(); i = command.find('$', i + 1)) {
    const char c = command[i + 1];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '@' || c == '*') places_them = true;
  }
  std::vector<std::string> argv = {"/bin/sh", "-c", places_them ? command : command + " \"$@\"", "plugboard-callback"};
  for (size_t i = 0; i < call.operands().size(); ++i) {
    auto path = folder.path() / ("in" + std::to_string(i) + ".npy");
    PB_RETURN_IF_ERROR(io::write_npy(path, to_array(call.operands()[i])));
    argv.push_back(path.string());
  }
  std::vector<std::filesystem::path> outputs;
  for (size_t i = 0; i < call.results().size(); ++i) {
    outputs.push_back(folder.path() / ("out" + std::to_string(i) + ".npy"));
    argv.push_back(outputs.back().string());
  }
  // The child's environment: ours, plus which callback this is.
  std::vector<std::string> envp = {"PLUGBOARD_CALLBACK=" + name};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PLUGBOARD_CALLBACK=", 19) != 0) envp.emplace_back(*e);

  const std::string what = "--callback " + name + ": `" + command + "`";
  PB_ASSIGN_OR_RETURN(const ExitStatus status, run_process_group(what, std::move(argv), std::move(envp), timeout));
  if (!status.success()) return make_error(Code::kAborted, what + " " + status.describe());
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto result = read_result(outputs[i], call.results()[i]);
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
  PB_RETURN_IF_ERROR(check_callback_timeout(options.timeout_seconds, std::to_string(options.timeout_seconds)));
  const auto timeout = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(options.timeout_seconds * 1000)));
  if (!options.commands.empty()) install_callback_signal_handlers();
  for (const std::string& spec : options.commands) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return invalid_argument("--callback '" + spec + "': expected NAME=COMMAND");
    std::string name = spec.substr(0, eq), command = spec.substr(eq + 1);
    if (name == kPrintTarget) return invalid_argument("--callback " + name + ": that name is the print hook's");
    PB_RETURN_IF_ERROR(annotate(receiver->add_blocking(name,
                                                       [name, command, timeout](const BlockingCall& call) {
                                                         return run_command(name, command, timeout, call);
                                                       }),
                                "--callback " + spec));
  }
  return receiver;
}

Expected<double> parse_callback_timeout(std::string_view text) {
  PB_ASSIGN_OR_RETURN(const double seconds, parse_double(text, "--callback-timeout"));
  PB_RETURN_IF_ERROR(check_callback_timeout(seconds, "'" + std::string(text) + "'"));
  return seconds;
}

CLI::Validator callback_timeout_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto parsed = parse_callback_timeout(text);
        if (parsed) return std::string();
        // CLI11 names the option itself.
        std::string_view m = parsed.error().message();
        for (std::string_view prefix : {"--callback-timeout: ", "--callback-timeout "})
          if (m.starts_with(prefix)) m.remove_prefix(prefix.size());
        return std::string(m);
      },
      "SECONDS", "callback timeout");
}

}  // namespace plugboard::cli
