// overlay/log.hpp — the overlay's logger (base/log.hpp).
#pragma once

#include "base/log.hpp"

namespace phoenix::overlay {

inline const std::shared_ptr<spdlog::logger>& logger() {
  static const auto instance = base::module_logger("overlay");
  return instance;
}

}  // namespace phoenix::overlay
