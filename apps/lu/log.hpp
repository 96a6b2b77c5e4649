// apps/lu/log.hpp — the LU application's spdlog logger ("lu"), quiet (warn) by default.
#pragma once

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace phoenix::apps::lu {

inline const std::shared_ptr<spdlog::logger>& lu_log() {
  static const auto instance = [] {
    if (auto existing = spdlog::get("lu")) return existing;
    auto l = spdlog::stderr_color_mt("lu");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return instance;
}

}  // namespace phoenix::apps::lu
