// find_plugin_member: table lookup, or inspection of the wheel's shared libraries.
#include "fetch/plugin_member.h"

#include <vector>

#include "base/regular_file.h"
#include "fetch/elf_symbols.h"

namespace plugboard::fetch {
namespace {

bool under_plugin_namespace(std::string_view member) {
  return member.starts_with("jax_plugins/") || member.starts_with("xla_plugins/");
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Status check_pjrt_plugin_file(const std::filesystem::path& file, const std::string& what) {
  // open_regular_file refuses a FIFO or a device without waiting on it (exports_dynamic_symbol would open it).
  PB_RETURN_IF_ERROR(annotate(open_regular_file(file), what));
  PB_ASSIGN_OR_RETURN(bool exports, annotate(exports_dynamic_symbol(file, "GetPjrtApi"), what));
  if (!exports)
    return make_error(Code::kFailedPrecondition,
                      what + " is not a PJRT plugin: it is not an ELF shared library that exports GetPjrtApi");
  return ok();
}

bool is_shared_library_name(std::string_view member) {
  const std::string_view base = member.substr(member.rfind('/') == std::string_view::npos ? 0 : member.rfind('/') + 1);
  return base.ends_with(".so") || base.find(".so.") != std::string_view::npos;
}

Expected<PluginMember> find_plugin_member(const Wheel& wheel, const PackageSpec& spec, const KnownPackage* known,
                                          const std::filesystem::path& scratch_dir, bool progress) {
  const std::string which = spec.to_string() + " (wheel " + wheel.path().string() + ")";
  if (known) {
    const WheelMember* m = wheel.find(known->plugin_path);
    if (!m)
      return make_error(Code::kNotFound, which + " has no member " + known->plugin_path +
                                             ", where the table of known packages says its plugin is");
    return PluginMember{m, std::nullopt};
  }

  struct Found {
    const WheelMember* member;
    ExtractedMember extracted;
  };
  std::vector<Found> exporting;
  std::vector<std::string> inspected;
  for (const WheelMember& m : wheel.members()) {
    if (!is_shared_library_name(m.name)) continue;
    inspected.push_back(m.name);
    PB_ASSIGN_OR_RETURN(ExtractedMember x, wheel.extract(m, scratch_dir, progress));
    PB_ASSIGN_OR_RETURN(bool exports, exports_dynamic_symbol(x.file.path(), "GetPjrtApi"));
    if (exports) exporting.push_back({&m, std::move(x)});
  }
  if (inspected.empty())
    return make_error(Code::kFailedPrecondition, which + " is not a PJRT plugin package: it holds no shared library");
  if (exporting.empty())
    return make_error(Code::kFailedPrecondition, which + " is not a PJRT plugin package: none of its shared libraries (" +
                                                     join(inspected) + ") exports GetPjrtApi");
  if (exporting.size() > 1) {
    // Several libraries export it: the one in a plugin namespace package, if it is alone there.
    std::vector<Found*> preferred;
    std::vector<std::string> names;
    for (Found& f : exporting) {
      names.push_back(f.member->name);
      if (under_plugin_namespace(f.member->name)) preferred.push_back(&f);
    }
    if (preferred.size() != 1)
      return make_error(Code::kFailedPrecondition,
                        which + " has several shared libraries exporting GetPjrtApi (" + join(names) +
                            "): add the package to known_packages.json to say which is the plugin");
    return PluginMember{preferred.front()->member, std::move(preferred.front()->extracted)};
  }
  return PluginMember{exporting.front().member, std::move(exporting.front().extracted)};
}

}  // namespace plugboard::fetch
