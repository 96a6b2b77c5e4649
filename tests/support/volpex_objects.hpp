// Helpers for tests of the Volpex layer: objects (immutable shared bodies) made from text, and read back.
#pragma once

#include <cstring>
#include <string>
#include <utility>

#include "phoenix/volpex/object.hpp"

namespace phoenix::volpex::test {

inline object text(const std::string& s) {
  Bytes b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return make_object(std::move(b));
}

// "<none>" for no object, so a check that expected one prints something readable.
inline std::string as_text(const object& o) {
  return o ? std::string(reinterpret_cast<const char*>(o->data()), o->size()) : "<none>";
}

}  // namespace phoenix::volpex::test
