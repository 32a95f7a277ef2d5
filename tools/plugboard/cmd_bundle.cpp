// `plugboard bundle --target NAME=PKG==VER --target NAME=PATH ... --out DIR`: fetch the plugins (as
// `plugboard fetch` does) and write a bundle: the files, stored once each, and plugboard.json.
// Per-target settings: --probe NAME=KIND, --priority NAME=N, --create-option NAME:KEY=VALUE.
// The command line is read whole first (a bad value is a usage error, exit 2, before anything is
// fetched), then the bundle is assembled in one checked, locked step: on any error nothing is written.
// --replace builds a new bundle beside DIR and swaps it in whole when it is complete (bundle/replace.h):
// the result holds exactly the targets given, and a failed build leaves DIR as it was.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/parse_number.h"
#include "base/regular_file.h"
#include "bundle/assemble.h"
#include "bundle/precompile.h"
#include "bundle/replace.h"
#include "bundle/discovery.h"
#include "callback/device_bridge.h"
#include "commands.h"
#include "fetch/fetch.h"
#include "platforms/registry.h"

namespace plugboard::cli {
namespace {

struct Options {
  std::vector<std::string> targets, probes, priorities, create_options, companions;
  std::vector<std::string> precompile, gpu_target_configs;
  std::string out;
  bool lock = false, offline = false, no_bridge = false, replace = false;
  std::string lock_file = "plugboard.lock", from, cache, python = "python3";
};

Expected<std::pair<std::string, std::string>> split_once(const std::string& s, char sep, const std::string& flag) {
  const size_t at = s.find(sep);
  if (at == std::string::npos || at == 0 || at + 1 == s.size())
    return invalid_argument(flag + " '" + s + "': expected NAME" + std::string(1, sep) + "VALUE");
  return std::make_pair(s.substr(0, at), s.substr(at + 1));
}

// "true"/"false" → bool, an integer (optional '-', digits) → int64 parsed strictly (out of range is
// an error naming the flag, never a clamp), anything else → string.
Expected<NamedValueData> option_value(const std::string& v, const std::string& flag) {
  if (v == "true" || v == "false") return NamedValueData(v == "true");
  const std::string_view digits = std::string_view(v).substr(!v.empty() && v[0] == '-' ? 1 : 0);
  const bool integer = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (!integer) return NamedValueData(v);
  PB_ASSIGN_OR_RETURN(int64_t i, parse_int64(v, flag));
  return NamedValueData(i);
}

fetch::FetchOptions fetch_options(const Options& o) {
  fetch::FetchOptions fo;
  fo.cache_dir = o.cache.empty() ? fetch::default_cache_dir() : std::filesystem::path(o.cache);
  fo.lock_path = o.lock_file;
  fo.write_lock = o.lock;
  if (o.offline) fo.offline_from = o.from;
  fo.progress = ::isatty(STDERR_FILENO) == 1;
  fo.python = o.python;
  return fo;
}

// The command line, read whole before anything is fetched or written: every error here is a usage error.
struct Request {
  struct Target {
    std::string name;
    std::optional<fetch::PackageSpec> spec;  // fetched; else `file` is a local plugin
    std::filesystem::path file;
    std::optional<select::ProbeKind> probe;
    std::optional<int> priority;
    std::vector<NamedValue> create_options;
  };
  std::vector<Target> targets;
  std::vector<std::pair<std::string, fetch::PackageSpec>> companions;  // target, wheel
};

Expected<Request> parse_request(const Options& o) {
  Request r;
  for (const auto& t : o.targets) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(t, '=', "--target"));
    // Before anything is fetched: a bad name must not leave a cache or lock file changed behind it.
    if (!bundle::is_valid_target_name(kv.first))
      return invalid_argument("--target " + t + ": '" + kv.first +
                              "' is not a valid target name (letters, digits, _ . -; a letter or digit first; at most 64)");
    for (const auto& other : r.targets)
      if (other.name == kv.first) return invalid_argument("--target " + t + ": target " + kv.first + " is given twice");
    Request::Target target;
    target.name = kv.first;
    if (kv.second.find("==") != std::string::npos) {
      PB_ASSIGN_OR_RETURN(target.spec, annotate(fetch::parse_package_spec(kv.second), "--target " + t));
    } else {
      target.file = kv.second;
    }
    r.targets.push_back(std::move(target));
  }
  auto find = [&](const std::string& name, const std::string& flag) -> Expected<Request::Target*> {
    for (auto& t : r.targets)
      if (t.name == name) return &t;
    return invalid_argument(flag + ": no --target named " + name);
  };
  for (const auto& p : o.probes) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(p, '=', "--probe"));
    PB_ASSIGN_OR_RETURN(Request::Target * t, find(kv.first, "--probe " + p));
    PB_ASSIGN_OR_RETURN(t->probe, annotate(select::parse_probe_kind(kv.second), "--probe " + p));
  }
  for (const auto& p : o.priorities) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(p, '=', "--priority"));
    PB_ASSIGN_OR_RETURN(Request::Target * t, find(kv.first, "--priority " + p));
    PB_ASSIGN_OR_RETURN(int64_t n, parse_int64(kv.second, "--priority " + kv.first, std::numeric_limits<int32_t>::min(),
                                               std::numeric_limits<int32_t>::max()));
    t->priority = static_cast<int>(n);
  }
  for (const auto& p : o.create_options) {
    PB_ASSIGN_OR_RETURN(auto target_kv, split_once(p, ':', "--create-option"));
    PB_ASSIGN_OR_RETURN(auto kv, split_once(target_kv.second, '=', "--create-option"));
    PB_ASSIGN_OR_RETURN(Request::Target * t, find(target_kv.first, "--create-option " + p));
    for (const NamedValue& old : t->create_options)
      if (old.name == kv.first) return invalid_argument("--create-option " + p + ": " + kv.first + " is given twice");
    PB_ASSIGN_OR_RETURN(NamedValueData value, option_value(kv.second, "--create-option " + target_kv.first + ":" + kv.first));
    t->create_options.push_back({kv.first, std::move(value)});
  }
  for (const auto& c : o.companions) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(c, '=', "--companion"));
    PB_ASSIGN_OR_RETURN(fetch::PackageSpec spec, annotate(fetch::parse_package_spec(kv.second), "--companion " + c));
    r.companions.emplace_back(kv.first, std::move(spec));
  }
  if (o.offline && o.from.empty()) return invalid_argument("--offline needs --from DIR (a folder of wheels)");
  return r;
}

// Fetches what the request names, then assembles the bundle in one step (bundle/assemble.h: all checked
// before anything is written, under the bundle's lock).
Expected<bundle::Assembled> run(const Options& o, const Request& r) {
  std::vector<bundle::TargetSource> sources;
  std::vector<std::pair<size_t, fetch::PackageSpec>> to_fetch;
  for (const auto& t : r.targets) {
    bundle::TargetSource s;
    s.name = t.name;
    if (t.spec) to_fetch.push_back({sources.size(), *t.spec});
    else s.file = t.file;
    sources.push_back(std::move(s));
  }
  const fetch::FetchOptions fo = fetch_options(o);
  if (!to_fetch.empty()) {
    std::vector<fetch::PackageSpec> specs;
    for (auto& [i, spec] : to_fetch) specs.push_back(spec);
    PB_ASSIGN_OR_RETURN(auto fetched, fetch::fetch(specs, fo));
    for (size_t k = 0; k < fetched.size(); ++k) {
      bundle::TargetSource& s = sources[to_fetch[k].first];
      const fetch::FetchedPlugin& f = fetched[k];
      s.file = f.file;
      s.sha256 = f.plugin_sha256;
      s.platform = f.platform;
      s.priority = f.priority;
      if (auto p = select::parse_probe_kind(f.probe)) s.probe = *p;
      s.provenance = bundle::Provenance{f.spec.name, f.spec.version, f.wheel, f.wheel_sha256, f.plugin_path};
    }
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    bundle::TargetSource& s = sources[i];
    const Request::Target& t = r.targets[i];
    if (!s.provenance) {  // a local file: its name says what it can
      select::Candidate c{s.name, "", "", s.file};
      bundle::guess_platform(c);
      s.platform = c.platform;
      s.probe = c.probe;
      s.priority = c.priority;
    }
    if (t.probe) {
      s.probe = *t.probe;
      // A probe that is mandatory for its platform (TPU) says what the target is.
      if (const platforms::PlatformTraits* p = platforms::platform_for_probe(s.probe); p && p->probe_mandatory)
        s.platform = p->name;
    }
    if (t.priority) s.priority = *t.priority;
    s.create_options = t.create_options;
  }
  bundle::BundlePlan plan;
  plan.targets = std::move(sources);
  for (const auto& [target, spec] : r.companions) {
    PB_ASSIGN_OR_RETURN(fetch::FetchedWheel w, annotate(fetch::fetch_wheel(spec, fo), "--companion " + target + "=" + spec.to_string()));
    plan.companion_wheels.push_back({target, w.wheel, spec.to_string() + " (wheel sha256 " + w.wheel_sha256 + ")"});
  }
  // A target of a platform whose host callbacks need a device bridge (CUDA) carries plugboard's bridge
  // beside its plugin, where host callbacks look for it; nothing else in the bundle (or in plugboard)
  // needs the vendor's runtime. These are the plan's only companion files.
  if (!o.no_bridge) {
    for (const platforms::PlatformTraits& platform : platforms::platforms()) {
      if (!platform.callbacks || !platform.callbacks->bridge) continue;
      const std::string& ffi = platform.callbacks->ffi_platform;
      for (const auto& p : device_bridge_search_path(ffi, {}))
        if (std::error_code ec; std::filesystem::is_regular_file(p, ec)) {
          plan.companion_files.push_back({"", platform.name, p, "plugboard " PLUGBOARD_VERSION " " + ffi + " callback bridge"});
          break;
        }
    }
  }
  return bundle::assemble_bundle(o.out, plan);
}

// --precompile with each --gpu-target-config read.
Expected<std::vector<bundle::PrecompileOutcome>> precompile(const Options& o) {
  bundle::PrecompileRequest request;
  for (const std::string& p : o.precompile) request.programs.emplace_back(p);
  for (const std::string& g : o.gpu_target_configs) {
    PB_ASSIGN_OR_RETURN(auto name_file, split_once(g, '=', "--gpu-target-config"));
    PB_ASSIGN_OR_RETURN(std::string text, annotate(read_regular_file(name_file.second, size_t{1} << 20),
                                                   "--gpu-target-config " + g));
    request.topologies[name_file.first] = bundle::gpu_topology_options(std::move(text));
  }
  return bundle::precompile_bundle(o.out, request);
}

// Whether this run placed a companion file (a device bridge) with `target`.
bool shipped_a_companion_file(const bundle::Assembled& a, const std::string& target) {
  for (const std::string& names : a.companion_file_targets) {
    std::stringstream in(names);
    for (std::string name; std::getline(in, name, ',');)
      if (name == target) return true;
  }
  return false;
}

}  // namespace

Command add_bundle_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("bundle", "write a bundle of several PJRT plugins and its plugboard.json");
  sub->add_option("--target,-t", o->targets, "NAME=PACKAGE==VERSION (fetched) or NAME=PATH (a local plugin)")->required();
  sub->add_option("--out", o->out, "the bundle folder (created or updated)")->required();
  sub->add_option("--probe", o->probes, "NAME=none|cuda|rocm|tpu: the device probe of a target");
  sub->add_option("--priority", o->priorities, "NAME=N: boot priority (higher first)");
  sub->add_option("--companion", o->companions, "NAME=PKG==VER: a wheel of libraries the target needs (e.g. nvidia-cuda-runtime-cu13), laid out where its RUNPATH looks");
  sub->add_option("--create-option", o->create_options, "NAME:KEY=VALUE: a PJRT create option of a target");
  sub->add_flag("--lock", o->lock, "record the fetched wheels and plugins in the lock file");
  sub->add_option("--lock-file", o->lock_file, "lock file (default plugboard.lock)");
  sub->add_flag("--offline", o->offline, "use wheels already on disk (--from), never pip");
  sub->add_option("--from", o->from, "folder of wheels for --offline");
  sub->add_option("--cache", o->cache, "plugin cache (default $XDG_CACHE_HOME/plugboard)");
  sub->add_option("--python", o->python, "the Python whose pip fetches wheels");
  sub->add_flag("--replace", o->replace,
                "build a new bundle beside --out and swap it in whole when complete (a failed build leaves --out as it was; "
                "two builds of one --out take turns on the lock file OUT.lock beside it)");
  sub->add_flag("--no-callback-bridge", o->no_bridge, "do not ship the CUDA callback bridge with CUDA targets");
  sub->add_option("--precompile", o->precompile,
                  "PROGRAM: compile it for every target that can compile here and store the executable in the bundle "
                  "(repeatable)");
  sub->add_option("--gpu-target-config", o->gpu_target_configs,
                  "NAME=FILE: a text GpuTargetConfigProto, so that --precompile compiles for CUDA target NAME on a "
                  "machine without its GPU");
  return {sub, [o] {
            auto request = parse_request(*o);
            if (!request) return usage_error(request.error());
            // --replace: everything below writes into the staging folder until the swap.
            const std::string out = o->out;
            std::unique_ptr<bundle::BundleReplacement> replacement;
            if (o->replace) {
              auto r = bundle::BundleReplacement::begin(out);
              if (!r) {
                print_error(r.error());
                return kExitFailure;
              }
              replacement = std::move(*r);
              o->out = replacement->staging().string();
            }
            auto a = run(*o, *request);
            if (!a) {
              print_error(a.error());
              return kExitFailure;
            }
            for (size_t i = 0; i < request->companions.size() && i < a->companion_wheel_files.size(); ++i) {
              const size_t n = a->companion_wheel_files[i];
              std::printf("companion %s: %zu librar%s for target %s\n", request->companions[i].second.to_string().c_str(), n,
                          n == 1 ? "y" : "ies", request->companions[i].first.c_str());
            }
            for (const auto& t : a->manifest.targets) {
              const platforms::PlatformTraits* platform = platforms::find_platform(t.platform);
              if (o->no_bridge || !platform || !platform->callbacks || !platform->callbacks->bridge) continue;
              const platforms::DeviceBridgeFile& bridge = *platform->callbacks->bridge;
              if (shipped_a_companion_file(*a, t.name))
                std::printf("callback bridge %s shipped with target %s\n", bridge.file_name.c_str(), t.name.c_str());
              else
                std::fprintf(stderr, "plugboard: warning: no %s to ship with target %s: host callbacks on it will need "
                             "%s (%s)\n", bridge.file_name.c_str(), t.name.c_str(), bridge.variable.c_str(), bridge.build_hint.c_str());
            }
            if (!o->precompile.empty()) {
              auto outcomes = precompile(*o);
              if (!outcomes) {
                print_error(outcomes.error());
                return kExitFailure;
              }
              for (const bundle::PrecompileOutcome& p : *outcomes) {
                if (p.skipped) {
                  std::printf("not precompiled for %s: %s\n", p.target.c_str(), p.skipped->to_string().c_str());
                  continue;
                }
                for (const std::string& program : p.programs)
                  std::printf("precompiled for %s: %s\n", p.target.c_str(), program.c_str());
              }
            }
            if (replacement) {
              if (auto swapped = replacement->commit(); !swapped) {
                print_error(swapped.error());
                return kExitFailure;
              }
              o->out = out;
            }
            std::printf("bundle %s: %zu target(s)\n", o->out.c_str(), a->manifest.targets.size());
            for (const auto& t : a->manifest.targets)
              std::printf("  %-14s %-8s PJRT %-5s %s\n", t.name.c_str(), t.platform.c_str(),
                          t.pjrt_api.value_or("?").c_str(), t.file.c_str());
            return kExitOk;
          }};
}

}  // namespace plugboard::cli
