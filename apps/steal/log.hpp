// apps/steal/log.hpp — the work-stealing layer's spdlog logger ("steal"), quiet (warn) by default.
#pragma once

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace phoenix::apps {

inline const std::shared_ptr<spdlog::logger>& steal_log() {
  static const auto instance = [] {
    if (auto existing = spdlog::get("steal")) return existing;
    auto l = spdlog::stderr_color_mt("steal");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return instance;
}

}  // namespace phoenix::apps
