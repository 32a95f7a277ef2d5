// `plugboard bundle --target NAME=PKG==VER --target NAME=PATH ... --out DIR`: fetch the plugins (as
// `plugboard fetch` does) and write a bundle: the files, stored once each, and plugboard.json.
// Per-target settings: --probe NAME=KIND, --priority NAME=N, --create-option NAME:KEY=VALUE.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bundle/assemble.h"
#include "bundle/discovery.h"
#include "callback/device_bridge.h"
#include "commands.h"
#include "fetch/fetch.h"

namespace plugboard::cli {
namespace {

struct Options {
  std::vector<std::string> targets, probes, priorities, create_options, companions;
  std::string out;
  bool lock = false, offline = false, no_bridge = false;
  std::string lock_file = "plugboard.lock", from, cache, python = "python3";
};

Expected<std::pair<std::string, std::string>> split_once(const std::string& s, char sep, const std::string& flag) {
  const size_t at = s.find(sep);
  if (at == std::string::npos || at == 0 || at + 1 == s.size())
    return invalid_argument(flag + " '" + s + "': expected NAME" + std::string(1, sep) + "VALUE");
  return std::make_pair(s.substr(0, at), s.substr(at + 1));
}

// "4" → int64, "true"/"false" → bool, else string.
NamedValueData option_value(const std::string& v) {
  if (v == "true" || v == "false") return v == "true";
  char* end = nullptr;
  long long i = std::strtoll(v.c_str(), &end, 10);
  if (!v.empty() && end && *end == 0) return static_cast<int64_t>(i);
  return v;
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

Expected<bundle::Manifest> run(const Options& o) {
  std::vector<bundle::TargetSource> sources;
  std::vector<std::pair<size_t, fetch::PackageSpec>> to_fetch;
  for (const auto& t : o.targets) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(t, '=', "--target"));
    bundle::TargetSource s;
    s.name = kv.first;
    if (kv.second.find("==") != std::string::npos) {
      PB_ASSIGN_OR_RETURN(fetch::PackageSpec spec, annotate(fetch::parse_package_spec(kv.second), "--target " + t));
      to_fetch.push_back({sources.size(), spec});
    } else {
      s.file = kv.second;
    }
    sources.push_back(std::move(s));
  }
  if (!to_fetch.empty()) {
    const fetch::FetchOptions fo = fetch_options(o);
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
  for (auto& s : sources)
    if (!s.provenance) {  // a local file: its name says what it can
      select::Candidate c{s.name, "", "", s.file};
      bundle::guess_platform(c);
      s.platform = c.platform;
      s.probe = c.probe;
      s.priority = c.priority;
    }
  auto find = [&](const std::string& name, const std::string& flag) -> Expected<bundle::TargetSource*> {
    for (auto& s : sources)
      if (s.name == name) return &s;
    return invalid_argument(flag + ": no --target named " + name);
  };
  for (const auto& p : o.probes) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(p, '=', "--probe"));
    PB_ASSIGN_OR_RETURN(bundle::TargetSource * s, find(kv.first, "--probe " + p));
    PB_ASSIGN_OR_RETURN(s->probe, annotate(select::parse_probe_kind(kv.second), "--probe " + p));
    if (s->probe == select::ProbeKind::kTpu) s->platform = "tpu";
  }
  for (const auto& p : o.priorities) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(p, '=', "--priority"));
    PB_ASSIGN_OR_RETURN(bundle::TargetSource * s, find(kv.first, "--priority " + p));
    s->priority = std::atoi(kv.second.c_str());
  }
  for (const auto& p : o.create_options) {
    PB_ASSIGN_OR_RETURN(auto target_kv, split_once(p, ':', "--create-option"));
    PB_ASSIGN_OR_RETURN(auto kv, split_once(target_kv.second, '=', "--create-option"));
    PB_ASSIGN_OR_RETURN(bundle::TargetSource * s, find(target_kv.first, "--create-option " + p));
    s->create_options.push_back({kv.first, option_value(kv.second)});
  }
  PB_ASSIGN_OR_RETURN(bundle::Manifest manifest, bundle::write_bundle(o.out, sources));
  for (const auto& c : o.companions) {
    PB_ASSIGN_OR_RETURN(auto kv, split_once(c, '=', "--companion"));
    PB_ASSIGN_OR_RETURN(fetch::PackageSpec spec, annotate(fetch::parse_package_spec(kv.second), "--companion " + c));
    PB_ASSIGN_OR_RETURN(fetch::FetchedWheel w, fetch::fetch_wheel(spec, fetch_options(o)));
    PB_ASSIGN_OR_RETURN(size_t n, annotate(bundle::add_companion_wheel(o.out, kv.first, w.wheel,
                                                                       spec.to_string() + " (wheel sha256 " + w.wheel_sha256 + ")"),
                                           "--companion " + c));
    std::printf("companion %s: %zu librar%s for target %s\n", spec.to_string().c_str(), n, n == 1 ? "y" : "ies", kv.first.c_str());
  }
  // A CUDA target carries plugboard's CUDA callback bridge beside its plugin, where host callbacks
  // look for it; nothing else in the bundle (or in plugboard) needs CUDA.
  PB_ASSIGN_OR_RETURN(manifest, bundle::read_manifest(o.out));
  for (const auto& t : manifest.targets) {
    if (o.no_bridge || t.platform != "cuda") continue;
    std::optional<std::filesystem::path> bridge;
    for (const auto& p : device_bridge_search_path("CUDA", {}))
      if (std::error_code ec; std::filesystem::is_regular_file(p, ec)) {
        bridge = p;
        break;
      }
    if (!bridge) {
      std::fprintf(stderr, "plugboard: warning: no %s to ship with target %s: host callbacks on it will need "
                   "PLUGBOARD_CUDA_BRIDGE (build plugboard with nvcc)\n", device_bridge_file_name("CUDA").c_str(), t.name.c_str());
      continue;
    }
    PB_RETURN_IF_ERROR(annotate(bundle::add_companion_file(o.out, t.name, *bridge, "plugboard " PLUGBOARD_VERSION " CUDA callback bridge"),
                                "shipping the CUDA callback bridge with target " + t.name));
    std::printf("callback bridge %s shipped with target %s\n", bridge->filename().c_str(), t.name.c_str());
  }
  return bundle::read_manifest(o.out);
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
  sub->add_flag("--no-callback-bridge", o->no_bridge, "do not ship the CUDA callback bridge with CUDA targets");
  return {sub, [o] {
            auto m = run(*o);
            if (!m) {
              print_error(m.error());
              return 1;
            }
            std::printf("bundle %s: %zu target(s)\n", o->out.c_str(), m->targets.size());
            for (const auto& t : m->targets)
              std::printf("  %-14s %-8s PJRT %-5s %s\n", t.name.c_str(), t.platform.c_str(),
                          t.pjrt_api.value_or("?").c_str(), t.file.c_str());
            return 0;
          }};
}

}  // namespace plugboard::cli
