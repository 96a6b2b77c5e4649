#include "overlay/log.hpp"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace phoenix::overlay {

std::shared_ptr<spdlog::logger> module_logger(const char* name) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto existing = spdlog::get(name)) return existing;
  auto l = spdlog::stderr_color_mt(name);
  l->set_level(spdlog::level::warn);
  return l;
}

}  // namespace phoenix::overlay
