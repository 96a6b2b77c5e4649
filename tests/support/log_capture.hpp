// What the overlay logs at warn and above while the object lives, to look for a line in it.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <memory>
#include <string>

#include "overlay/log.hpp"

namespace phoenix::test {

struct log_capture {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(512);
  log_capture() {  // what a node reports at warn and above (the logger passes info on, for `log NODE`)
    sink->set_level(spdlog::level::warn);
    phoenix::overlay::logger()->sinks().push_back(sink);
  }
  ~log_capture() {
    auto& sinks = phoenix::overlay::logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;
  // The first captured line that contains `text`, or "".
  std::string find(const std::string& text) const {
    for (const auto& line : sink->last_formatted())
      if (line.find(text) != std::string::npos) return line;
    return "";
  }
};

}  // namespace phoenix::test
