#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/parse_number.h"
#include "base/terminal_text.h"
#include "base/trace.h"
#include "commands.h"
#include "json_output.h"
#include "io/array_format.h"
#include "io/npy.h"
#include "bundle/boot.h"
#include "compile_cache/cached_compile.h"
#include "callback/execute.h"
#include "callback/registry.h"
#include "run_callbacks.h"
#include "runtime/client.h"

namespace plugboard::cli {
namespace {

struct Options {
  std::string program;
  std::string plugin;
  std::string bundle;
  std::string target;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::vector<std::string> xla_options;
  CompileOptions compile;                // from plugin_defaults and xla_options, by parse_flags
  bool no_compile_cache = false;
  std::vector<std::string> donate_text;  // --donate as typed; parsed into `donate` by parse_flags
  std::vector<int> donate;
  std::vector<std::string> callbacks;  // NAME=COMMAND
  double callback_timeout = kDefaultCallbackTimeoutSeconds;  // seconds per call of a --callback command
  std::string print_limit_text = "50";  // --print-limit as typed; parsed into `print_limit`
  size_t print_limit = 50;
  bool plugin_defaults = false;
  bool json = false;
  std::string trace_file;  // --trace: the run's trace (Chrome trace-event JSON) goes there
};

// The flags whose text must parse (numbers strictly: the whole text, in range; XLA options by their
// declared type): an error names the flag and is a usage error.
Status parse_flags(Options& o) {
  o.compile = o.plugin_defaults ? CompileOptions::plugin_defaults() : CompileOptions();
  for (const auto& x : o.xla_options) PB_RETURN_IF_ERROR(annotate(o.compile.set_from_text(x), "--xla-option"));
  o.donate.clear();
  for (const auto& text : o.donate_text) {
    PB_ASSIGN_OR_RETURN(int64_t index, parse_int64(text, "--donate", 0, std::numeric_limits<int>::max()));
    o.donate.push_back(static_cast<int>(index));
  }
  PB_ASSIGN_OR_RETURN(uint64_t limit, parse_uint64(o.print_limit_text, "--print-limit",
                                                   std::numeric_limits<uint32_t>::max()));
  o.print_limit = static_cast<size_t>(limit);
  return ok();
}

// The .npy descr cannot tell bf16 from u16 or f8 from u8: the program's parameter type decides.
std::optional<DType> raw_bits_dtype(const Signature& sig, size_t i) {
  if (!sig.parameters_known || i >= sig.parameters.size()) return std::nullopt;
  DType t = sig.parameters[i].dtype;
  if (t == DType::kBF16 || t == DType::kF8E5M2 || t == DType::kF8E4M3FN) return t;
  return std::nullopt;
}

// The client to run on: the --plugin given, or the target the bundle's boot chooses (--target, else
// PLUGBOARD_TARGET / PLUGBOARD_TARGETS, else priority).
struct Opened {
  std::shared_ptr<Client> client;
  std::vector<compile_cache::PrecompiledFile> precompiled;  // the chosen bundle target's
};

Expected<Opened> open_client(const Options& o) {
  if (!o.plugin.empty()) {
    PB_ASSIGN_OR_RETURN(auto loaded, load_plugin(o.plugin));
    PB_ASSIGN_OR_RETURN(std::shared_ptr<Client> client, Client::create(loaded));
    return Opened{std::move(client), {}};
  }
  bundle::BootOptions b;
  if (!o.bundle.empty()) b.discovery.bundle = o.bundle;
  select::SelectOptions base;
  if (!o.target.empty()) {
    base.target = o.target;
    base.policy_source = "--target";
  }
  b.select = select::options_from_environment(base);
  PB_ASSIGN_OR_RETURN(bundle::Boot booted, bundle::boot(b));
  PB_RETURN_IF_ERROR(booted.selection.status());
  const auto* chosen = booted.selection.report.chosen_report();
  std::fprintf(stderr, "plugboard: target %s chosen (%s)\n", chosen->candidate.name.c_str(),
               booted.selection.report.policy.c_str());
  Opened opened{booted.selection.client, {}};
  for (const select::ExpectedFile& f : chosen->candidate.precompiled) opened.precompiled.push_back({f.path, f.size, f.sha256});
  return opened;
}

// Host callbacks: the print hook when the program names it (text and bytecode both hold the target
// name as a string), and every --callback, declared to the client (before compiling). Null when the
// program needs none.
Expected<std::shared_ptr<HostCallbacks>> bind_callbacks(const Options& o, Client& client, const Program& program) {
  if (o.callbacks.empty() && program.bytes().find(kPrintTarget) == std::string::npos) return nullptr;
  RunCallbackOptions cb;
  cb.commands = o.callbacks;
  cb.timeout_seconds = o.callback_timeout;
  cb.print_limit = o.print_limit;
  cb.print_to = o.json ? stderr : stdout;  // --json keeps stdout for the report
  PB_ASSIGN_OR_RETURN(std::shared_ptr<HostCallbacks> callbacks, make_run_callbacks(cb));
  PB_RETURN_IF_ERROR(annotate(declare_callbacks(client, *callbacks), "host callbacks for " + program.name()));
  return callbacks;
}

// Through the bundle's precompiled programs and the persistent compile cache (unless
// --no-compile-cache); what was refused on the way goes to stderr.
Expected<compile_cache::CompileOutcome> compile_program(const Opened& opened, const Program& program, const Options& o) {
  compile_cache::CompileSources sources;
  if (!o.no_compile_cache) {
    PB_ASSIGN_OR_RETURN(sources, compile_cache::default_sources(opened.precompiled));
  }
  auto compiled = compile_cache::compile(*opened.client, program, o.compile, sources);
  if (compiled)
    for (const std::string& note : compiled->notes) std::fprintf(stderr, "plugboard: note: %s\n", note.c_str());
  if (!compiled && compiled.error().message().find("No FFI handler registered for") != std::string::npos)
    compiled.error().annotate("the program calls a host callback `plugboard run` does not bind: give it with "
                              "--callback NAME=COMMAND (or use the print hook, " + std::string(kPrintTarget) + ")");
  return compiled;
}

// The --input files as device buffers, in parameter order.
Expected<std::vector<Buffer>> read_inputs(const Options& o, Client& client, const Executable& exe) {
  std::vector<Buffer> inputs;
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    PB_ASSIGN_OR_RETURN(io::HostArray a, annotate(io::read_npy(o.inputs[i], raw_bits_dtype(exe.signature(), i)),
                                                  "input " + std::to_string(i)));
    PB_ASSIGN_OR_RETURN(Buffer b, annotate(client.buffer_from_host(a.data, a.dtype, a.dims), "input " + o.inputs[i]));
    inputs.push_back(std::move(b));
  }
  return inputs;
}

struct Execution {
  std::vector<Buffer> outputs;
  uint64_t blocking_calls = 0, ordered_calls = 0;  // with callbacks only
};

Expected<Execution> execute_program(const Executable& exe, std::vector<Buffer>& inputs,
                                    const std::shared_ptr<HostCallbacks>& callbacks, const Options& o) {
  std::vector<Buffer*> args;
  for (auto& b : inputs) args.push_back(&b);
  ExecuteOptions exec_options;
  exec_options.donate = o.donate;
  Execution out;
  if (!callbacks) {
    PB_ASSIGN_OR_RETURN(out.outputs, exe.execute(args, exec_options));
    return out;
  }
  PB_ASSIGN_OR_RETURN(CallbackExecution execution, execute_with_callbacks_async(exe, args, callbacks, exec_options));
  PB_RETURN_IF_ERROR(execution.await());
  out.outputs = std::move(execution.outputs);
  out.blocking_calls = execution.blocking_calls();
  out.ordered_calls = execution.ordered_calls();
  return out;
}

// Each output's entry in the report, written to --output-dir as outN.npy when given.
Expected<nlohmann::json> report_outputs(const std::vector<Buffer>& outputs, const Options& o) {
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec) return make_error(Code::kPermissionDenied, "cannot create --output-dir " + o.output_dir + ": " + ec.message());
  }
  nlohmann::json entries = nlohmann::json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    io::HostArray a;
    a.dtype = outputs[i].dtype();
    a.dims.assign(outputs[i].dims().begin(), outputs[i].dims().end());
    PB_ASSIGN_OR_RETURN(a.data, outputs[i].to_host());
    nlohmann::json out = {{"index", i}, {"dtype", dtype_name(a.dtype)}, {"shape", a.dims},
                          {"values", io::format_leading_values(a, 8)}};
    if (!o.output_dir.empty()) {
      auto path = std::filesystem::path(o.output_dir) / ("out" + std::to_string(i) + ".npy");
      PB_RETURN_IF_ERROR(io::write_npy(path, a));
      out["file"] = path.string();
    }
    entries.push_back(out);
  }
  return entries;
}

Expected<nlohmann::json> run(const Options& o) {
  trace::Scope span("plugboard run", "cli");
  span.arg("program", o.program);
  PB_ASSIGN_OR_RETURN(Opened opened, open_client(o));
  const std::shared_ptr<Client>& client = opened.client;
  const Plugin* plugin = &client->plugin();
  PB_ASSIGN_OR_RETURN(Program program, Program::from_file(o.program));
  PB_ASSIGN_OR_RETURN(std::shared_ptr<HostCallbacks> callbacks, bind_callbacks(o, *client, program));

  auto compiled = compile_program(opened, program, o);
  if (!compiled) return std::unexpected(std::move(compiled).error());
  // Bound by reference: moving the expected into a second one made GCC 12 warn (maybe-uninitialized).
  const std::shared_ptr<Executable>& exe = compiled->executable;

  PB_ASSIGN_OR_RETURN(std::vector<Buffer> inputs, read_inputs(o, *client, *exe));
  auto t0 = Clock::now();
  PB_ASSIGN_OR_RETURN(Execution execution, execute_program(*exe, inputs, callbacks, o));
  const double execute_ms = ms_since(t0);

  nlohmann::json report = {{"plugin", plugin->path().string()},   {"platform", client->platform_name()},
                           {"pjrt_version", plugin->version().to_string()}, {"program", program.name()},
                           {"format", format_name(program.format())}, {"compile_ms", compiled->ms},
                           {"executable_source", compile_cache::origin_id(compiled->origin)},
                           {"executable", compile_cache::describe(compiled->origin, compiled->ms)},
                           {"execute_ms", execute_ms},             {"outputs", nlohmann::json::array()}};
  if (callbacks)
    report["callbacks"] = {{"blocking_calls", execution.blocking_calls}, {"ordered_calls", execution.ordered_calls}};
  PB_ASSIGN_OR_RETURN(report["outputs"], report_outputs(execution.outputs, o));
  return report;
}

// run(), traced into o.trace_file when it is given: the trace is written whether the run succeeds or
// not (a failed boot's stages are in it).
Expected<nlohmann::json> run_traced(const Options& o) {
  if (o.trace_file.empty()) return run(o);
  PB_RETURN_IF_ERROR(annotate(trace::start(), "--trace " + o.trace_file));
  auto report = run(o);
  PB_ASSIGN_OR_RETURN(const trace::Trace recorded, annotate(trace::stop(), "--trace " + o.trace_file));
  PB_RETURN_IF_ERROR(annotate(recorded.write(o.trace_file), "--trace"));
  std::fprintf(stderr, "plugboard: trace of %zu spans written to %s (open it in https://ui.perfetto.dev)\n",
               recorded.spans.size(), o.trace_file.c_str());
  // What went wrong beside the run (a plugin's own profiler that failed): in the trace, and said here.
  for (const std::string& note : recorded.notes)
    std::fprintf(stderr, "plugboard: trace note: %s\n", terminal_safe(note).c_str());
  return report;
}

void print_text(const nlohmann::json& r) {
  std::printf("plugin   %s (platform %s, PJRT %s)\n", r["plugin"].get<std::string>().c_str(),
              r["platform"].get<std::string>().c_str(), r["pjrt_version"].get<std::string>().c_str());
  std::printf("program  %s (%s): %s, executed in %.3f ms\n", r["program"].get<std::string>().c_str(),
              r["format"].get<std::string>().c_str(), r["executable"].get<std::string>().c_str(),
              r["execute_ms"].get<double>());
  if (r.contains("callbacks"))
    std::printf("callbacks %llu blocking, %llu ordered (print) calls\n",
                static_cast<unsigned long long>(r["callbacks"]["blocking_calls"].get<uint64_t>()),
                static_cast<unsigned long long>(r["callbacks"]["ordered_calls"].get<uint64_t>()));
  for (const auto& o : r["outputs"]) {
    std::vector<int64_t> dims = o["shape"];
    std::printf("out%-5zu %-14s %s", o["index"].get<size_t>(),
                shape_string(*dtype_from_name(o["dtype"].get<std::string>()), dims).c_str(),
                o["values"].get<std::string>().c_str());
    if (o.contains("file")) std::printf("  -> %s", o["file"].get<std::string>().c_str());
    std::printf("\n");
  }
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("run", "compile a StableHLO program (MLIR text or bytecode) and run it on .npy inputs");
  sub->add_option("program", o->program, "program.mlir or program.mlirbc")->required();
  auto* plugin_opt = sub->add_option("--plugin", o->plugin, "PJRT plugin shared library");
  auto* bundle_opt = sub->add_option("--bundle", o->bundle, "a bundle folder: the target is chosen at boot");
  sub->add_option("--target", o->target, "the bundle's target to use (fails if it cannot start)")->needs(bundle_opt);
  plugin_opt->excludes(bundle_opt);
  sub->add_option("--input,-i", o->inputs, "input arrays (.npy), in parameter order");
  sub->add_option("--output-dir,-o", o->output_dir, "write each output as outN.npy here");
  sub->add_option("--xla-option", o->xla_options, "XLA option name=value (repeatable), e.g. xla_cpu_enable_fast_min_max=true");
  sub->add_flag("--plugin-defaults", o->plugin_defaults, "compile with the plugin's defaults, not JAX's numerics");
  sub->add_flag("--no-compile-cache", o->no_compile_cache,
                "compile, without looking in the persistent compile cache or storing there (PLUGBOARD_COMPILE_CACHE=off "
                "does the same); a bundle's precompiled programs are not used either");
  sub->add_option("--donate", o->donate_text, "index of an input to donate to the execution (repeatable)");
  sub->add_option("--callback", o->callbacks,
                  "NAME=COMMAND: a blocking host callback; COMMAND gets the operand .npy files, then the result "
                  ".npy files to write (repeatable)");
  sub->add_option("--callback-timeout", o->callback_timeout,
                  "seconds each --callback command may run before its process group is killed (default 60)")
      ->check(callback_timeout_check());
  sub->add_option("--print-limit", o->print_limit_text, "values shown per tensor by the plugboard.print hook (default 50)");
  sub->add_flag("--json", o->json, "print JSON");
  sub->add_option("--trace", o->trace_file,
                  "write the run's trace to FILE: Chrome trace-event JSON (boot, compile, copies, execution, "
                  "callbacks), which Perfetto (ui.perfetto.dev) and chrome://tracing open");
  return {sub, [o] {
            if (auto flags = parse_flags(*o); !flags) return usage_error(flags.error());
            auto report = run_traced(*o);
            if (!report) {
              print_error(report.error());
              return 1;
            }
            if (o->json) std::printf("%s\n", json_text(*report, 2).c_str());
            else print_text(*report);
            return 0;
          }};
}

}  // namespace plugboard::cli
