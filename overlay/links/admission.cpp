#include "overlay/links/admission.hpp"

#include <algorithm>
#include <utility>

namespace phoenix::overlay {

accept_backoff::step accept_backoff::on_failure() {
  const bool began = failures_++ == 0;
  next_ = began ? first_ : std::min(next_ * 2, most_);
  return {next_, began};
}

std::uint64_t accept_backoff::on_success() {
  const auto n = failures_;
  failures_ = 0;
  return n;
}

handshake_caps::verdict handshake_caps::try_admit(const std::string& address) {
  if (in_progress_ >= total_) return verdict::over_total;
  auto& n = by_address_[address];
  if (n >= per_address_) return verdict::over_address;
  ++n;
  ++in_progress_;
  return verdict::admitted;
}

void handshake_caps::release(const std::string& address) {
  const auto it = by_address_.find(address);
  if (it == by_address_.end()) return;
  --in_progress_;
  if (--it->second == 0) by_address_.erase(it);
}

std::string address_part(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  return colon == std::string::npos ? endpoint : endpoint.substr(0, colon);
}

}  // namespace phoenix::overlay
