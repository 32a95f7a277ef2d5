#include "lapack/targets.h"

#include <string>

#include "base/no_throw.h"
#include "callback/registry.h"
#include "lapack/kernels.h"
#include "lapack/library.h"

namespace plugboard {

Status declare_lapack(const Client& client) noexcept {
  return no_throw("declaring LAPACK kernels", [&]() -> Status {
    PB_ASSIGN_OR_RETURN(std::string platform, callback_platform(client));
    if (platform != "Host")
      return make_error(Code::kUnimplemented, "LAPACK kernels run on the host: " + client.plugin().path().string() +
                                                  " is a " + client.platform_name() + " plugin");
    PB_RETURN_IF_ERROR(lapack::functions());
    for (const lapack::Kernel& k : lapack::kernels())
      PB_RETURN_IF_ERROR(declare_builtin_target(client, k.target, k.handler));
    return ok();
  });
}

}  // namespace plugboard
