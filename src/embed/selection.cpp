// The facade's discover() and boot(): the bundle layer's boot, with reports turned into plain values.
#include "base/no_throw.h"
#include "bundle/boot.h"
#include "embed/handles.h"
#include "lapack/library.h"

namespace plugboard::api {

namespace {

Report to_report(const select::BootReport& report, std::vector<std::string> notes) {
  Report out;
  out.policy = report.policy;
  out.chosen = report.chosen;
  out.notes = std::move(notes);
  out.text = report.to_text();
  for (const select::CandidateReport& c : report.candidates) {
    CandidateReport r;
    r.name = c.candidate.name;
    r.platform = c.candidate.platform;
    r.source = c.candidate.source;
    r.origin = c.candidate.origin;
    r.precompiled_mismatch = c.candidate.precompiled_mismatch;
    r.path = c.candidate.path;
    r.verdict = select::verdict_name(c.verdict);
    if (c.failed_stage) r.failed_stage = select::stage_name(*c.failed_stage);
    r.error = c.error;
    r.excluded_because = c.excluded_because;
    r.isolated = c.isolated;
    for (const select::StageResult& s : c.stages) r.stages.push_back({select::stage_name(s.stage), s.passed, s.ms, s.detail});
    out.candidates.push_back(std::move(r));
  }
  return out;
}

Expected<bundle::BootOptions> boot_options(const SelectionSettings& settings) {
  bundle::BootOptions options;
  options.discovery.bundle = settings.bundle;
  options.discovery.environment = settings.use_environment;
  select::SelectOptions base;
  base.target = settings.target;
  base.preference = settings.preference;
  if (settings.target || !settings.preference.empty()) base.policy_source = settings.policy_source.value_or("the caller's settings");
  if (settings.probes) base.probes = *settings.probes;
  if (settings.isolate) base.isolate = *settings.isolate;
  if (settings.use_environment) {
    PB_ASSIGN_OR_RETURN(options.select, select::read_environment(base));
    // What the caller set explicitly wins over the environment's flags.
    if (settings.probes) options.select.probes = *settings.probes;
    if (settings.isolate) options.select.isolate = *settings.isolate;
  } else {
    options.select = std::move(base);
  }
  return options;
}

}  // namespace

const char* version() noexcept { return PLUGBOARD_VERSION; }

Expected<Report> discover(const SelectionSettings& settings) noexcept {
  return no_throw("discovering targets", [&]() -> Expected<Report> {
    PB_ASSIGN_OR_RETURN(bundle::BootOptions options, boot_options(settings));
    options.select.before_loading_only = true;
    PB_ASSIGN_OR_RETURN(bundle::Boot b, bundle::boot(options));
    return to_report(b.selection.report, std::move(b.notes));
  });
}

Expected<Boot> boot(const SelectionSettings& settings) noexcept {
  return no_throw("boot", [&]() -> Expected<Boot> {
    PB_ASSIGN_OR_RETURN(bundle::BootOptions options, boot_options(settings));
    PB_ASSIGN_OR_RETURN(bundle::Boot b, bundle::boot(options));
    // A boot confined to its bundle takes nothing from the environment: not PLUGBOARD_LAPACK either
    // (from its success on; a failed boot leaves the process as it was).
    if (!settings.use_environment && b.selection.client) lapack::ignore_environment();
    Boot out;
    out.status = b.selection.status();
    out.report = to_report(b.selection.report, std::move(b.notes));
    // A CPU client's eigh and SVD may call LAPACK: the report names it and where it comes from (it is
    // opened at the first call, not here).
    if (b.selection.client && b.selection.client->platform_name() == "cpu") out.report.notes.push_back(lapack::describe());
    if (b.selection.client) {
      std::vector<compile_cache::PrecompiledFile> precompiled;
      if (b.selection.report.chosen)
        for (const select::ExpectedFile& f : b.selection.report.candidates[*b.selection.report.chosen].candidate.precompiled)
          precompiled.push_back({f.path, f.size, f.sha256});
      out.client = wrap_client(std::move(b.selection.client), std::move(precompiled));
    }
    return out;
  });
}

}  // namespace plugboard::api
