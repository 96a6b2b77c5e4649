// error_out.hpp — the optional error out-parameter of the Volpex layer's calls (`std::error_code* ec`).
#pragma once

#include <system_error>

namespace phoenix::volpex {

// Stores `value` where the caller asked for the error, if it did.
inline void set_error(std::error_code* ec, std::error_code value) {
  if (ec) *ec = value;
}

}  // namespace phoenix::volpex
