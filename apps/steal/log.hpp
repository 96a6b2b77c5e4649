// apps/steal/log.hpp — the work-stealing layer's spdlog logger ("steal"), quiet (warn) by default.
#pragma once

#include "phoenix/launch/app_log.hpp"

namespace phoenix::apps {

inline const std::shared_ptr<spdlog::logger>& steal_log() {
  static const auto instance = launch::app_logger("steal");
  return instance;
}

}  // namespace phoenix::apps
