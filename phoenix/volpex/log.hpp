// log.hpp — the Volpex layer's spdlog logger ("volpex"), quiet (warn) by default; see base/log.hpp.
#pragma once

#include "base/log.hpp"

namespace phoenix::volpex {

inline const std::shared_ptr<spdlog::logger>& logger() {
  static const auto instance = base::module_logger("volpex");
  return instance;
}

}  // namespace phoenix::volpex
