#include "platforms/device_nodes.h"

#include <cctype>
#include <system_error>

namespace plugboard::platforms {

std::vector<std::string> numbered_nodes(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    if (name.size() == prefix.size() || !std::isdigit(static_cast<unsigned char>(name[prefix.size()]))) continue;
    out.push_back(name);
  }
  return out;
}

bool node_exists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

std::optional<std::string> hides_every_device(const ProbeInputs& inputs, const std::string& variable) {
  if (!inputs.getenv) return std::nullopt;
  std::optional<std::string> v = inputs.getenv(variable);
  if (!v) return std::nullopt;
  if (v->empty() || *v == "-1" || *v == "NoDevFiles") return variable + "=\"" + *v + "\" hides every device";
  return std::nullopt;
}

ProbeResult unavailable(std::string why) { return {false, std::move(why)}; }

}  // namespace plugboard::platforms
