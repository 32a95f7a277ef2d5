#include "bundle/precompile.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "base/atomic_file.h"
#include "base/clock.h"
#include "base/environment.h"
#include "base/no_throw.h"
#include "base/sha256.h"
#include "bundle/assemble.h"
#include "compile_cache/cache_key.h"
#include "compile_cache/cached_compile.h"
#include "compile_cache/entry.h"
#include "compile_cache/host_cpu.h"
#include "fetch/file_lock.h"
#include "runtime/client.h"
#include "runtime/topology.h"

namespace plugboard::bundle {
namespace {

namespace fs = std::filesystem;

// What compiling one program for one target gives: the serialized executable, and its description
// when a client compiled it (a topology's executable is described by the plugin when first loaded).
struct Compiled {
  std::string serialized;
  std::optional<Description> description;
};
using CompileFn = std::function<Expected<Compiled>(const Program&)>;

struct Compiler {
  compile_cache::Target target;
  CompileFn compile;
  std::shared_ptr<Client> client;      // kept alive for `compile`
  std::shared_ptr<Topology> topology;  // or this
};

// How `entry` compiles here, or why it cannot.
Expected<Compiler> compiler_for(const fs::path& dir, const TargetEntry& entry, const PrecompileRequest& request,
                                const CompileOptions& options) {
  const auto topology = request.topologies.find(entry.name);
  const bool cpu = entry.platform == "cpu";
  if (!cpu && topology == request.topologies.end())
    return make_error(Code::kFailedPrecondition,
                      "a " + entry.platform + " target compiles only with its devices present" +
                          (entry.platform == "cuda" ? " (give it a GPU target configuration to compile without one)" : ""));
  PB_ASSIGN_OR_RETURN(const fs::path file, resolve_in_bundle(dir, entry.file, "file of target " + entry.name));
  PB_ASSIGN_OR_RETURN(std::shared_ptr<const Plugin> plugin, load_plugin(file));
  Compiler c;
  c.target.plugin_sha256 = entry.sha256;
  if (topology != request.topologies.end()) {
    PB_ASSIGN_OR_RETURN(std::unique_ptr<Topology> t, Topology::create(plugin, topology->second));
    c.topology = std::move(t);
    c.target.platform_name = c.topology->platform_name();
    c.target.device_kinds = c.topology->device_kinds();
    c.target.device_kinds.resize(std::min<size_t>(c.target.device_kinds.size(), static_cast<size_t>(options.num_replicas * options.num_partitions)));
    if (auto flags = environment_override("XLA_FLAGS")) c.target.xla_flags = *flags;
    c.compile = [t = c.topology, options](const Program& p) -> Expected<Compiled> {
      PB_ASSIGN_OR_RETURN(std::string serialized, t->compile_serialized(p, options));
      return Compiled{std::move(serialized), std::nullopt};
    };
    return c;
  }
  ClientOptions client_options;
  client_options.create_options = entry.create_options;
  PB_ASSIGN_OR_RETURN(c.client, Client::create(plugin, client_options));
  const size_t devices_used = static_cast<size_t>(options.num_replicas * options.num_partitions);
  PB_ASSIGN_OR_RETURN(c.target, compile_cache::target_of(*c.client, devices_used, entry.sha256));
  c.compile = [client = c.client, options](const Program& p) -> Expected<Compiled> {
    PB_ASSIGN_OR_RETURN(std::shared_ptr<Executable> exe, client->compile(p, options));
    PB_ASSIGN_OR_RETURN(std::string serialized, exe->serialize());
    return Compiled{std::move(serialized), exe->description()};
  };
  return c;
}

// What the key holds about this machine, readable (manifest.h: BuiltOn).
BuiltOn built_on(const compile_cache::Target& target) {
  BuiltOn b;
  b.xla_flags = target.xla_flags;
  if (target.host_cpu.empty()) return b;
  b.cpu_digest = target.host_cpu;
  if (auto cpu = compile_cache::this_host_cpu()) {
    b.cpu = cpu->model;
    for (const std::string& f : cpu->flags) b.cpu_flags += (b.cpu_flags.empty() ? "" : " ") + f;
  }
  return b;
}

std::string describe(const std::string& name, double ms, size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), " (%.1f ms, %.0f KiB)", ms, bytes / 1024.0);
  return name + text;
}

}  // namespace

std::vector<NamedValue> gpu_topology_options(std::string target_config_text) {
  return {{"topology", std::string("1x1x1")}, {"target_config", std::move(target_config_text)}};
}

Expected<std::vector<PrecompileOutcome>> precompile_bundle(const fs::path& dir, const PrecompileRequest& request) noexcept {
  return no_throw("precompiling programs into a bundle", [&]() -> Expected<std::vector<PrecompileOutcome>> {
    std::vector<Program> programs;
    for (const fs::path& p : request.programs) {
      PB_ASSIGN_OR_RETURN(Program program, annotate(Program::from_file(p), "--precompile " + p.string()));
      programs.push_back(std::move(program));
    }
    PB_ASSIGN_OR_RETURN(fetch::FileLock lock,
                        annotate(fetch::FileLock::acquire(dir / kBundleLockName), "locking bundle " + dir.string()));
    PB_ASSIGN_OR_RETURN(Manifest manifest, read_manifest(dir));
    for (const auto& [name, options] : request.topologies) {
      bool known = false;
      for (const TargetEntry& e : manifest.targets) known = known || e.name == name;
      if (!known) return invalid_argument("a topology is given for target " + name + ", which bundle " + dir.string() + " does not hold");
    }
    const CompileOptions options;  // JAX's numerics, as Client::compile's callers get by default
    const std::string serialized_options = options.serialize();
    std::vector<PrecompileOutcome> outcomes;
    for (TargetEntry& entry : manifest.targets) {
      PrecompileOutcome outcome{entry.name, {}, std::nullopt};
      auto compiler = compiler_for(dir, entry, request, options);
      if (!compiler) {
        outcome.skipped = compiler.error();
        outcomes.push_back(std::move(outcome));
        continue;
      }
      std::vector<PrecompiledProgram> precompiled;
      for (const Program& program : programs) {
        const auto start = Clock::now();
        PB_ASSIGN_OR_RETURN(Compiled compiled,
                            annotate(compiler->compile(program), "precompiling " + program.name() + " for target " + entry.name));
        const double ms = ms_since(start);
        const std::string key = compile_cache::cache_key(compiler->target, serialized_options, program.bytes());
        compile_cache::Entry e = compile_cache::make_entry(key, compiler->target, program.name(), entry.file,
                                                          std::move(compiled.serialized), compiled.description);
        e.metadata["target"] = entry.name;
        PB_ASSIGN_OR_RETURN(const std::string bytes, compile_cache::encode_entry(e));
        const std::string relative = "compiled/" + entry.name + "/" + e.key + ".pbx";
        std::error_code ec;
        fs::create_directories(dir / "compiled" / entry.name, ec);
        PB_RETURN_IF_ERROR(annotate(write_file_atomically(dir / relative, bytes, 0644), "writing " + (dir / relative).string()));
        // The same program given twice is one entry.
        bool listed = false;
        for (const PrecompiledProgram& p : precompiled) listed = listed || p.file == relative;
        if (!listed)
          precompiled.push_back({program.name(), relative, bytes.size(),
                                 sha256_hex(std::as_bytes(std::span(bytes.data(), bytes.size()))), built_on(compiler->target)});
        outcome.programs.push_back(describe(program.name(), ms, bytes.size()));
      }
      // This run's programs replace the same programs' (or keys') earlier entries; others stay.
      for (const PrecompiledProgram& old : entry.precompiled) {
        bool replaced = false;
        for (const PrecompiledProgram& p : precompiled) replaced = replaced || p.program == old.program || p.file == old.file;
        if (!replaced) precompiled.push_back(old);
      }
      entry.precompiled = std::move(precompiled);
      outcomes.push_back(std::move(outcome));
    }
    PB_RETURN_IF_ERROR(write_manifest(dir, manifest));
    return outcomes;
  });
}

}  // namespace plugboard::bundle
