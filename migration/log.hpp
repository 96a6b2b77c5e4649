// log.hpp — the migration module's spdlog logger ("migration"), quiet (warn) by default; see base/log.hpp.
#pragma once

#include "base/log.hpp"

namespace phoenix::migration {

inline const std::shared_ptr<spdlog::logger>& logger() {
  static const auto instance = base::module_logger("migration");
  return instance;
}

}  // namespace phoenix::migration
