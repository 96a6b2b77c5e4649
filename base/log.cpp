#include "base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <mutex>

namespace phoenix::base {

namespace {
constexpr auto recorded = spdlog::level::info;  // what recent_lines() keeps, at least
constexpr std::size_t recent_capacity = 1000;
}  // namespace

const std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt>& recent_lines() {
  static const auto sink = [] {
    auto s = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(recent_capacity);
    s->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
    return s;
  }();
  return sink;
}

std::shared_ptr<spdlog::logger> module_logger(const char* name) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (auto existing = spdlog::get(name)) return existing;
  auto l = spdlog::stderr_color_mt(name);
  l->sinks().push_back(recent_lines());
  set_module_level(*l, spdlog::level::warn);
  return l;
}

// sinks()[0] is stderr: it prints `level`; the logger lets through whatever either sink wants.
void set_module_level(spdlog::logger& l, spdlog::level::level_enum level) {
  l.sinks().front()->set_level(level);
  l.set_level(std::min(level, recorded));
}

void follow_env_level(spdlog::logger& l, spdlog::level::level_enum before) {
  if (l.level() != before) set_module_level(l, l.level());
}

}  // namespace phoenix::base
