// The chaos test's node process (chaos.hpp): what it is started as, the records it writes, and its body.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "chaos.hpp"
#include "phoenix/launch/process_group.hpp"
#include "support/temp_dir.hpp"

namespace phoenix::test::chaos {

// statics assume a share at once, joiners join, resume takes up a suspended process, relay assumes nothing and
// neither joins nor migrates (a process restarted after a kill, only forwarding).
enum class role { statics, joiner, resume, relay };

struct member_args {
  std::string name;   // stable across a suspension
  std::string child;  // unique per process: names its files
  role how = role::statics;
  int index = 0;                             // origin number, share number
  bool origin = false;                       // sends spec.messages messages
  std::string listen = "tcp://127.0.0.1:0";  // a restarted process listens on its victim's port
  std::vector<std::string> peers;
  bool leaves = false, suspends = false;
  bool killable = false;  // may be killed: not a process that has its leave or its suspension to make
  std::optional<launch::Clock::time_point> chaos_until;  // default: chaos_for after it started
};

// A record file (chaos_check.hpp) written with one write(2) per line: whatever a process recorded before it
// was SIGKILLed is in the file, whole (a stdio buffer would die with it).
class record_file {
 public:
  explicit record_file(const std::filesystem::path& file, bool append = false)
      : fd_(::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + file.string());
  }
  ~record_file() { ::close(fd_); }
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;

  __attribute__((format(printf, 2, 3))) void line(const char* format, ...) {
    char text[256];
    va_list args;
    va_start(args, format);
    const int n = std::vsnprintf(text, sizeof text, format, args);
    va_end(args);
    if (n <= 0 || static_cast<std::size_t>(n) >= sizeof text ||
        ::write(fd_, text, static_cast<std::size_t>(n)) != n)
      throw std::runtime_error("a record could not be written");
  }

 private:
  int fd_;
};

// The body of a node process: runs its part of the chaos, writes its records, and returns its exit status.
int run_member(const spec& s, const member_args& a, const temp_dir& dir, const std::string& key,
               const launch::ChildPipes& pipes);

}  // namespace phoenix::test::chaos
