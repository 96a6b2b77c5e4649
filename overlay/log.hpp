// log.hpp — one spdlog logger per module, created once and quiet (warn) by default.
// Levels come from the node's configuration or SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=overlay=debug). Every line
// starts with the node's short name, since one process may run several nodes.
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace phoenix::overlay {

// The logger named `name` (stderr, level warn), created on first use; thread-safe.
std::shared_ptr<spdlog::logger> module_logger(const char* name);

inline const std::shared_ptr<spdlog::logger>& logger() {
  static const auto instance = module_logger("overlay");
  return instance;
}

}  // namespace phoenix::overlay
