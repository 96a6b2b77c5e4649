// phoenix/launch/process_memory.cpp — see process_memory.hpp.
#include "phoenix/launch/process_memory.hpp"

#include <malloc.h>

namespace phoenix::launch {

void keep_freed_memory() {
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

}  // namespace phoenix::launch
