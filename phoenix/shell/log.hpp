// phoenix/shell/log.hpp — phsh's spdlog logger ("phsh"), on stderr and quiet (warn) by default, like every
// module's; phsh applies SPDLOG_LEVEL (SPDLOG_LEVEL=phsh=debug shows what it starts).
#pragma once

#include <spdlog/cfg/env.h>

#include "phoenix/launch/app_log.hpp"

namespace phoenix::shell {

inline const std::shared_ptr<spdlog::logger>& logger() {
  static const auto instance = [] {
    auto l = launch::app_logger("phsh");
    spdlog::cfg::load_env_levels();  // after app_logger set warn: SPDLOG_LEVEL wins
    return l;
  }();
  return instance;
}

}  // namespace phoenix::shell
