// phoenix/launch/process_memory.hpp — how an application's node process keeps the memory it frees.
#pragma once

namespace phoenix::launch {

// Keeps freed memory in the process for the next allocation: glibc gives the top of its heap, and every buffer
// of 128 KiB and more, back to the kernel, and each page then faults in, zeroed, when it is used again. Node
// processes that free and allocate large buffers all the time (messages of whole blocks, key buckets) spent
// a tenth of their time so. Buffers below 32 MiB come from the heap, which is never trimmed; the cost is that
// the process keeps its peak memory until it exits, also after it handed its state on.
void keep_freed_memory();

}  // namespace phoenix::launch
