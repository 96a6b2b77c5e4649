// phoenix/shell/line_editor.cpp — see line_editor.hpp.
#include "phoenix/shell/line_editor.hpp"

#include <editline/readline.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace phoenix::shell {
namespace {

// libedit calls plain functions: the one editor's state lives here.
LineEditor::Completer g_completer;
std::vector<std::string> g_candidates;
std::optional<std::string> g_line;
bool g_eof = false;

void on_line(char* line) {
  if (line) {
    g_line = line;
    std::free(line);
  } else {
    g_eof = true;
  }
}

char* next_candidate(const char* text, int state) {
  static std::size_t next = 0;
  if (state == 0) next = 0;
  const std::size_t len = std::strlen(text);
  while (next < g_candidates.size()) {
    const std::string& c = g_candidates[next++];
    if (c.compare(0, len, text) == 0) return ::strdup(c.c_str());
  }
  return nullptr;
}

char** complete(const char* text, int start, int /*end*/) {
  const std::string before(rl_line_buffer, static_cast<std::size_t>(start));
  g_candidates = g_completer ? g_completer(before, text) : std::vector<std::string>{};
  if (g_candidates.empty()) return nullptr;  // libedit falls back to file names
  rl_attempted_completion_over = 1;
  return rl_completion_matches(text, next_candidate);
}

// Writes `text` with every '\n' as "\r\n": the terminal may be in libedit's raw mode.
void write_lines(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\n') out += '\r';
    out += ch;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

LineEditor::LineEditor(std::filesystem::path history_file, Completer completer)
    : history_file_(std::move(history_file)) {
  g_completer = std::move(completer);
  rl_readline_name = "phsh";
  rl_catch_signals = 0;  // phsh's own handlers: Ctrl-C abandons the line (cancel_line)
  rl_initialize();
  rl_attempted_completion_function = complete;
  using_history();
  stifle_history(1000);
  if (!history_file_.empty()) read_history(history_file_.c_str());
}

LineEditor::~LineEditor() {
  stop();
  if (!history_file_.empty()) write_history(history_file_.c_str());
  g_completer = nullptr;
}

void LineEditor::start(const std::string& prompt) {
  prompt_ = prompt;
  g_line.reset();
  g_eof = false;
  rl_callback_handler_install(prompt_.c_str(), on_line);
  editing_ = true;
}

std::optional<std::string> LineEditor::read_available(bool* eof) {
  *eof = false;
  if (!editing_) return std::nullopt;
  int pending = 0;
  if (::ioctl(STDIN_FILENO, FIONREAD, &pending) == 0 && pending == 0) {
    // Readable with nothing to read: the terminal is gone.
    *eof = true;
    stop();
    return std::nullopt;
  }
  rl_callback_read_char();
  if (g_eof) {
    *eof = true;
    stop();
    return std::nullopt;
  }
  if (!g_line) return std::nullopt;
  std::string line = std::move(*g_line);
  g_line.reset();
  stop();
  if (line.find_first_not_of(" \t") != std::string::npos) add_history(line.c_str());
  return line;
}

void LineEditor::cancel_line() {
  if (!editing_) return;
  rl_callback_handler_remove();
  write_lines("^C\n");
  editing_ = false;
  start(prompt_);
}

void LineEditor::print_above(const std::string& text) {
  if (!editing_) {  // the terminal is in its own mode: it turns '\n' into "\r\n" itself
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  // Take the line off the screen (the cursor ends at the start of an empty line), print, and let libedit
  // draw the prompt and what was typed so far again from there (a refresh starts from a cleared display).
  write_lines("\r\033[K" + text);
  rl_forced_update_display();
}

void LineEditor::stop() {
  if (!editing_) return;
  rl_callback_handler_remove();
  editing_ = false;
}

RawTerminal::RawTerminal() {
  if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
  termios raw = saved_;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  ok_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
}

RawTerminal::~RawTerminal() {
  if (ok_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

}  // namespace phoenix::shell
