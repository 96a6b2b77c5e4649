// apps/lu/log.hpp — the LU application's spdlog logger ("lu"), quiet (warn) by default.
#pragma once

#include "phoenix/launch/app_log.hpp"

namespace phoenix::apps::lu {

inline const std::shared_ptr<spdlog::logger>& lu_log() {
  static const auto instance = launch::app_logger("lu");
  return instance;
}

}  // namespace phoenix::apps::lu
