// apps/isort/log.hpp — integer sort's spdlog logger ("isort"), quiet (warn) by default.
#pragma once

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace phoenix::apps::isort {

inline const std::shared_ptr<spdlog::logger>& isort_log() {
  static const auto instance = [] {
    if (auto existing = spdlog::get("isort")) return existing;
    auto l = spdlog::stderr_color_mt("isort");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return instance;
}

}  // namespace phoenix::apps::isort
