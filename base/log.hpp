// base/log.hpp — one spdlog logger per module, created once and quiet (warn) by default.
// Levels come from the node's configuration or SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=overlay=debug). Every line
// starts with the node's short name, since one process may run several nodes.
//
// Besides stderr, every module logger writes to one process-wide ring of recent lines at level info and above,
// whatever stderr shows: a node reports them to the shell's `log NODE` (phoenix/control.hpp).
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>

namespace phoenix::base {

// The logger named `name` (stderr, level warn), created on first use; thread-safe.
std::shared_ptr<spdlog::logger> module_logger(const char* name);

// Sets what a module logger prints on stderr; it still passes info and above to recent_lines().
void set_module_level(spdlog::logger& l, spdlog::level::level_enum level);
// After spdlog::cfg::load_env_levels(): if it changed the logger's level from `before`, stderr prints that.
void follow_env_level(spdlog::logger& l, spdlog::level::level_enum before);

// The last lines of every module logger, oldest first.
const std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt>& recent_lines();

}  // namespace phoenix::base
