// log.hpp — the runtime's spdlog logger ("phoenix"), quiet (warn) by default; see base/log.hpp.
#pragma once

#include "base/log.hpp"

namespace phoenix {

inline const std::shared_ptr<spdlog::logger>& logger() {
  static const auto instance = base::module_logger("phoenix");
  return instance;
}

}  // namespace phoenix
