// phoenix/launch/app_log.cpp — see app_log.hpp.
#include "phoenix/launch/app_log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

namespace phoenix::launch {

std::shared_ptr<spdlog::logger> app_logger(const char* name) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto existing = spdlog::get(name)) return existing;
  auto l = spdlog::stderr_color_mt(name);
  l->set_level(spdlog::level::warn);
  return l;
}

}  // namespace phoenix::launch
