// phoenix/shell/line_editor.hpp — the interactive terminal: line editing, history (~/.phsh_history) and tab
// completion with libedit, driven by phsh's own poll loop (libedit's callback interface), so that events of
// node processes can be printed above the line being typed while it is being typed; and raw mode for watch.
//
// libedit keeps global state: one LineEditor at a time. Threads: the main thread only.
#pragma once

#include <termios.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace phoenix::shell {

class LineEditor {
 public:
  // The words that may complete `word`, given the line before it (`before`, up to the word's start).
  using Completer = std::function<std::vector<std::string>(const std::string& before, const std::string& word)>;

  // Loads the history file (if any). `completer` returning nothing falls back to file names.
  LineEditor(std::filesystem::path history_file, Completer completer);
  ~LineEditor();  // stops editing, saves the history
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;

  // Shows `prompt` and starts reading a line: the terminal is libedit's until the line is done or stop().
  void start(const std::string& prompt);
  // Call when stdin is readable: reads what is there. Returns the line once one is complete (editing has then
  // stopped; start() again for the next). Sets *eof at the end of input (Ctrl-D on an empty line).
  std::optional<std::string> read_available(bool* eof);
  // Abandons the line being typed (Ctrl-C) and shows a fresh prompt.
  void cancel_line();
  // Prints `text` (whole lines) above the line being typed, which is drawn again below it; plain output when
  // not editing.
  void print_above(const std::string& text);
  // Gives the terminal back (normal mode), keeping nothing of a line not yet entered.
  void stop();
  bool editing() const { return editing_; }

 private:
  std::filesystem::path history_file_;
  std::string prompt_;
  bool editing_ = false;
};

// The terminal on stdin without echo and line buffering while this lives (signals still work: Ctrl-C); the
// destructor restores it. ok() is false when stdin is not a terminal.
class RawTerminal {
 public:
  RawTerminal();
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool ok() const { return ok_; }

 private:
  termios saved_{};
  bool ok_ = false;
};

}  // namespace phoenix::shell
