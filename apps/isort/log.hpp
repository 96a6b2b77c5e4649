// apps/isort/log.hpp — integer sort's spdlog logger ("isort"), quiet (warn) by default.
#pragma once

#include "phoenix/launch/app_log.hpp"

namespace phoenix::apps::isort {

inline const std::shared_ptr<spdlog::logger>& isort_log() {
  static const auto instance = launch::app_logger("isort");
  return instance;
}

}  // namespace phoenix::apps::isort
