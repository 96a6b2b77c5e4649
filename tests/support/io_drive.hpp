// Drives an io_context from the test thread until a condition holds, in short slices.
#pragma once

#include <chrono>
#include <functional>

#include <asio.hpp>

namespace phoenix::test {

// Runs `io` until cond() holds or `limit` passed; whether it holds.
inline bool drive_until(asio::io_context& io, const std::function<bool()>& cond,
                        std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!cond() && std::chrono::steady_clock::now() < deadline) io.run_for(std::chrono::milliseconds(2));
  return cond();
}

}  // namespace phoenix::test
