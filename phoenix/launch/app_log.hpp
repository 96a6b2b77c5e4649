// phoenix/launch/app_log.hpp — one spdlog logger per application module (steal, lu, isort, ...), on stderr and
// quiet (warn) by default, as the runtime's own modules are (base/log.hpp, which libphoenix keeps private).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace phoenix::launch {

// The logger named `name`, created on first use; thread-safe.
std::shared_ptr<spdlog::logger> app_logger(const char* name);

}  // namespace phoenix::launch
