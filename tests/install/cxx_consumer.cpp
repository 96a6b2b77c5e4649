// Uses the installed C++ API: a node sends to a virtual node it assumes and receives the message.
#include <phoenix/node.hpp>

#include <cstdio>
#include <cstring>

int main() {
  phoenix::Node node;
  if (auto ec = node.initialize("tcp://127.0.0.1:0")) return std::printf("initialize: %s\n", ec.message().c_str()), 1;
  if (node.assume({0, 100})) return 1;
  const char text[] = "installed";
  if (node.send(7, 3, text, sizeof text)) return 1;
  auto m = node.recv_for(3, std::chrono::seconds(5));
  if (!m || m->size() != sizeof text || std::memcmp(m->data(), text, sizeof text) != 0 || m->dest() != 7) return 1;
  std::printf("cxx_consumer: received '%s' at vnode %llu from %llu\n", static_cast<const char*>(static_cast<const void*>(m->data())),
              static_cast<unsigned long long>(m->dest()), static_cast<unsigned long long>(m->source()));
  return node.finalize() ? 1 : 0;
}
