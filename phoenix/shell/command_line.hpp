// phoenix/shell/command_line.hpp — phsh's command language: words, command lines, and one parsed command.
//
// A script (`phsh FILE`, `phsh -c 'CMD; CMD'`) and an interactive line are the same language: words separated
// by blanks, '...' and "..." quote, a backslash escapes the next character (outside single quotes), '#' at the
// start of a word begins a comment, $NAME is an environment variable's value. Each command's options are parsed
// with CLI11, so `spawn --help` and the error for a bad option read like every other phoenix tool's. Pure
// functions: no I/O, no network.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace phoenix::shell {

// The words of one command line; `error` names what is wrong (an unterminated quote), else empty.
struct Words {
  std::vector<std::string> words;
  std::string error;
  bool ok() const { return error.empty(); }
};
// Variables: $NAME, ${NAME} and ${NAME:-DEFAULT} are replaced by their value from `env` (the process's
// environment unless a test gives another), outside single quotes, as sh does; \$ is a dollar sign.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
std::optional<std::string> environment_variable(const std::string& name);
Words split_words(std::string_view line, const EnvLookup& env = environment_variable);

// The command lines of a script or of -c: newlines and ';' outside quotes separate them, comments are dropped
// with the rest of their line. Lines with no words are left out. An unterminated quote runs to the end of its
// line; split_words reports it.
std::vector<std::string> split_commands(std::string_view text);

// '...' around `word` when it holds anything a POSIX shell would interpret (for ssh's remote command line and
// for echoing commands back).
std::string shell_quote(std::string_view word);

// One command, parsed. Each command uses the fields its usage names; the others keep their defaults.
struct Command {
  std::string name;                // "spawn", "leave", ... (empty for a line with no words)
  std::vector<std::string> nodes;  // leave, suspend, resume, kill, routes, log: node names
  int count = 1;                   // spawn -n
  int replicas = 0;                // spawn --replicas K: -n Volpex processes of K replicas each (0: plain nodes)
  std::string host;                // spawn, resume --host [USER@]HOST (spawn: HOST,HOST,... in turn)
  std::string via;                 // spawn, resume --via ssh://[USER@]GATEWAY[:PORT]
  int port = 0;                    // spawn, resume --port (0: any)
  std::string app;                 // spawn
  std::vector<std::string> args;   // spawn: the application's arguments
  std::string file;                // dot
  bool png = false;                // dot --png
  bool stop = false;               // quit --stop
  double seconds = 0;              // sleep S, watch --for S (0: until a key is pressed)
  std::optional<double> timeout;   // spawn, leave, suspend, resume, wait --timeout S (unset: the default)
  int lines = 50;                  // log NODE [N]
  std::string topic;               // help [COMMAND]
};

struct ParsedCommand {
  Command command;
  std::string error;  // one line, without the "phsh: " prefix; empty on success
  std::string help;   // set instead when the command asked for --help
  bool ok() const { return error.empty(); }
};

// Parses the words of one command line (words[0] is the command's name).
ParsedCommand parse_command(const std::vector<std::string>& words);

// Every command with its usage line and one line saying what it does, in the order `help` lists them.
struct CommandInfo {
  const char* name;
  const char* usage;
  const char* summary;
};
const std::vector<CommandInfo>& command_table();

// `help` (every command, one line each) or `help COMMAND` (its options); an unknown topic says so.
std::string help_text(const std::string& topic = {});

// True for commands whose further words are node names (completion offers node names there).
bool takes_node_names(std::string_view command);

}  // namespace phoenix::shell
