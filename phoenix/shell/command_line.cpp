// phoenix/shell/command_line.cpp — see command_line.hpp.
#include "phoenix/shell/command_line.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

namespace phoenix::shell {
namespace {

const std::vector<CommandInfo> commands = {
    {"spawn", "spawn [-n N] [--replicas K] [--host [USER@]HOST[,HOST...]] [--via ssh://GATEWAY] [--port P] APP [ARGS...]",
     "start N node processes of APP, one after the other; each joins the computation (--replicas: N Volpex "
     "processes of K replicas each)"},
    {"leave", "leave NODE...", "permanent leave: the node hands its virtual nodes and state on, then exits"},
    {"suspend", "suspend NODE", "temporary leave: the node saves its virtual nodes and state to a file, exits"},
    {"resume", "resume NODE [--port P] [--host [USER@]HOST] [--via ssh://GATEWAY]",
     "start a suspended node again, possibly elsewhere, with its virtual nodes and state"},
    {"kill", "kill NODE", "crash a node (SIGKILL), for fault drills"},
    {"nodes", "nodes", "the nodes: host, endpoint, intervals assumed, queued messages, messages/s, state"},
    {"routes", "routes NODE", "the node's links and DSDV routing table"},
    {"links", "links", "the link graph: the peers each node has a link up to"},
    {"map", "map", "which node assumes which part of the virtual node space [0, L)"},
    {"dot", "dot FILE [--png]", "the overlay as a Graphviz graph in FILE (--png: drawn by dot -Tpng too)"},
    {"watch", "watch [--for SECONDS]", "nodes and map, redrawn every second until a key is pressed"},
    {"wait", "wait [--timeout S]", "until every node process has exited; fails if one reported an error"},
    {"log", "log NODE [N]", "the node's last N log lines, and the last N of its output and error files"},
    {"sleep", "sleep SECONDS", "pause (scripts)"},
    {"help", "help [COMMAND]", "this list, or one command's options"},
    {"quit", "quit [--stop]", "leave phsh; the nodes keep running, unless --stop (closes their stdin)"},
};

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Builds the CLI11 parser of command `name`, binding its options to `c`. nullptr for an unknown command.
std::unique_ptr<CLI::App> make_parser(const std::string& name, Command& c) {
  const auto info = std::find_if(commands.begin(), commands.end(), [&](auto& i) { return name == i.name; });
  if (info == commands.end()) return nullptr;
  auto app = std::make_unique<CLI::App>(info->summary, name);
  app->set_help_flag("-h,--help", "this help");
  auto timeout = [&](const char* what) {
    app->add_option("--timeout", c.timeout, what)->check(CLI::PositiveNumber);
  };
  auto placement = [&] {
    app->add_option("--host", c.host, "run it on this host, through ssh ([USER@]HOST; resume: local = here)");
    app->add_option("--via", c.via, "peers reached through this SSH gateway (ssh://[USER@]GATEWAY[:PORT])");
    app->add_option("--port", c.port, "listen on this TCP port")->check(CLI::Range(1, 65535));
  };
  auto one_node = [&] {
    app->add_option_function<std::string>(
           "node", [&c](const std::string& n) { c.nodes = {n}; }, "node name")
        ->required();
  };
  if (name == "spawn") {
    app->add_option("-n", c.count, "how many node processes (with --replicas: Volpex processes)")
        ->check(CLI::Range(1, 256));
    app->add_option("--replicas", c.replicas,
                    "start each of the N processes as K replicas of a Volpex application (phoenix/volpex.h), "
                    "beside nodes that serve the dataspace (spawn volpex_server); with several --host, the "
                    "replicas of a process go to different hosts where there are enough")
        ->check(CLI::Range(1, 16));
    placement();
    timeout("seconds to wait for each node's port and join (default 60)");
    app->prefix_command();  // APP and everything after it belong to the application
  } else if (name == "leave") {
    app->add_option("node", c.nodes, "node names")->required();
    timeout("seconds to wait for each node to leave (default 60)");
  } else if (name == "suspend" || name == "kill" || name == "routes" || name == "resume") {
    one_node();
    if (name == "suspend") timeout("seconds to wait for the node to suspend (default 60)");
    if (name == "resume") {
      placement();
      timeout("seconds to wait for the node to join again (default 60)");
    }
  } else if (name == "log") {
    one_node();
    app->add_option("lines", c.lines, "how many lines (default 50)")->check(CLI::Range(1, 100000));
  } else if (name == "dot") {
    app->add_option("file", c.file, "the Graphviz file to write")->required();
    app->add_flag("--png", c.png, "also draw it with dot -Tpng (FILE with extension .png)");
  } else if (name == "watch") {
    app->add_option("--for", c.seconds, "stop after this many seconds")->check(CLI::PositiveNumber);
  } else if (name == "wait") {
    timeout("give up after this many seconds (default: no limit)");
  } else if (name == "sleep") {
    app->add_option("seconds", c.seconds, "how long")->required()->check(CLI::NonNegativeNumber);
  } else if (name == "help") {
    app->add_option("command", c.topic, "a command");
  } else if (name == "quit") {
    app->add_flag("--stop", c.stop,
                  "close the stdin of every node still running (they stop) and wait for them");
  }
  return app;
}

std::string check_spawn(Command& c, const std::vector<std::string>& rest) {
  const std::size_t first = !rest.empty() && rest[0] == "--" ? 1 : 0;  // "--" ends phsh's options
  if (rest.size() <= first) return "missing APP (usage: " + std::string(commands[0].usage) + ")";
  if (!first && rest[0].size() > 1 && rest[0][0] == '-') return "unknown option '" + rest[0] + "'";
  c.app = rest[first];
  c.args.assign(rest.begin() + static_cast<std::ptrdiff_t>(first) + 1, rest.end());
  return {};
}

std::string check_placement(const Command& c) {
  if (!c.via.empty() && c.via.rfind("ssh://", 0) != 0) return "--via must be ssh://[USER@]GATEWAY[:PORT]";
  if (!c.via.empty() && c.via.size() == 6) return "--via names no gateway";
  if (c.port != 0 && c.port + c.count - 1 > 65535) return "--port: the ports of -n nodes exceed 65535";
  return {};
}

}  // namespace

namespace {

// At line[i] == '$': appends the value of $NAME, ${NAME} or ${NAME:-DEFAULT} to `word` and returns the index of
// the last character used; a '$' followed by anything else is itself. An unset NAME without a default is
// empty, as in sh.
std::size_t expand_variable(std::string_view line, std::size_t i, std::string& word, const EnvLookup& env,
                            std::string& error) {
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (i + 1 < line.size() && line[i + 1] == '{') {
    const auto end = line.find('}', i + 2);
    if (end == std::string_view::npos) {
      error = "unterminated ${";
      return line.size();
    }
    const std::string_view body = line.substr(i + 2, end - i - 2);
    const auto dash = body.find(":-");
    const std::string name(body.substr(0, dash));
    if (name.empty() || !std::all_of(name.begin(), name.end(), name_char)) {
      error = "bad variable ${" + std::string(body) + "}";
      return line.size();
    }
    const auto value = env(name);
    if (value && !value->empty())
      word += *value;
    else if (dash != std::string_view::npos)
      word += body.substr(dash + 2);
    return end;
  }
  std::size_t j = i + 1;
  while (j < line.size() && name_char(line[j])) ++j;
  if (j == i + 1) {
    word.push_back('$');
    return i;
  }
  if (const auto value = env(std::string(line.substr(i + 1, j - i - 1)))) word += *value;
  return j - 1;
}

}  // namespace

std::optional<std::string> environment_variable(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

Words split_words(std::string_view line, const EnvLookup& env) {
  Words out;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (ch == '$') {
      i = expand_variable(line, i, word, env, out.error);
      if (!out.error.empty()) return out;
      in_word = true;
    } else if (is_blank(ch) || ch == '\n') {
      if (in_word) out.words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (ch == '#' && !in_word) {
      break;
    } else if (ch == '\'') {
      const auto end = line.find('\'', i + 1);
      if (end == std::string_view::npos) {
        out.error = "unterminated ' quote";
        return out;
      }
      word.append(line.substr(i + 1, end - i - 1));
      in_word = true;
      i = end;
    } else if (ch == '"') {
      std::size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '$') {
          j = expand_variable(line, j, word, env, out.error);
          if (!out.error.empty()) return out;
          continue;
        }
        if (line[j] == '\\' && j + 1 < line.size() &&
            (line[j + 1] == '"' || line[j + 1] == '\\' || line[j + 1] == '$'))
          ++j;
        word.push_back(line[j]);
      }
      if (j >= line.size()) {
        out.error = "unterminated \" quote";
        return out;
      }
      in_word = true;
      i = j;
    } else if (ch == '\\' && i + 1 < line.size()) {
      word.push_back(line[++i]);
      in_word = true;
    } else {
      word.push_back(ch);
      in_word = true;
    }
  }
  if (in_word) out.words.push_back(std::move(word));
  return out;
}

std::vector<std::string> split_commands(std::string_view text) {
  std::vector<std::string> out;
  std::string current;
  auto flush = [&] {
    const auto words = split_words(current);
    if (!words.words.empty() || !words.ok()) out.push_back(current);
    current.clear();
  };
  char quote = 0;
  bool word_start = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quote) {
      current.push_back(ch);
      if (ch == '\\' && quote == '"' && i + 1 < text.size() && text[i + 1] != '\n') {
        current.push_back(text[++i]);
      } else if (ch == quote) {
        quote = 0;
      } else if (ch == '\n') {  // an unterminated quote ends with its line
        current.pop_back();
        quote = 0;
        flush();
      }
      word_start = false;
      continue;
    }
    if (ch == '\n' || ch == ';') {
      flush();
      word_start = true;
    } else if (ch == '#' && word_start) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (ch == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
      current.push_back(ch);
      current.push_back(text[++i]);
      word_start = false;
    } else {
      if (ch == '\'' || ch == '"') quote = ch;
      current.push_back(ch);
      word_start = is_blank(ch);
    }
  }
  flush();
  return out;
}

std::string shell_quote(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) ||
           std::string_view("-_./=:,@%+").find(ch) != std::string_view::npos;
  });
  if (plain) return std::string(word);
  std::string out = "'";
  for (char ch : word) {
    if (ch == '\'')
      out += "'\\''";
    else
      out.push_back(ch);
  }
  return out + "'";
}

ParsedCommand parse_command(const std::vector<std::string>& words) {
  ParsedCommand p;
  if (words.empty()) return p;
  Command& c = p.command;
  c.name = words[0];
  auto app = make_parser(c.name, c);
  if (!app) {
    p.error = "unknown command '" + c.name + "' (try help)";
    return p;
  }
  std::vector<std::string> args(words.rbegin(), words.rend() - 1);  // CLI11 takes them reversed
  try {
    app->parse(args);
  } catch (const CLI::CallForHelp&) {
    p.help = app->help();
    return p;
  } catch (const CLI::ParseError& e) {
    p.error = c.name + ": " + e.what();
    return p;
  }
  if (c.name == "spawn") p.error = check_spawn(c, app->remaining());
  if (p.error.empty() && (c.name == "spawn" || c.name == "resume")) p.error = check_placement(c);
  if (!p.error.empty()) p.error = c.name + ": " + p.error;
  return p;
}

const std::vector<CommandInfo>& command_table() { return commands; }

std::string help_text(const std::string& topic) {
  if (!topic.empty()) {
    Command c;
    auto app = make_parser(topic, c);
    if (!app) return "no command '" + topic + "' (try help)\n";
    return app->help();
  }
  constexpr std::size_t column = 24;  // where summaries start; a longer usage gets a line of its own
  std::string out = "commands (help COMMAND for its options; NODE is a name such as n1):\n";
  for (const auto& i : commands) {
    const std::string usage = i.usage;
    if (usage.size() + 2 > column)
      out += "  " + usage + "\n" + std::string(column + 2, ' ') + i.summary + "\n";
    else
      out += "  " + usage + std::string(column - usage.size(), ' ') + i.summary + "\n";
  }
  return out;
}

bool takes_node_names(std::string_view command) {
  return command == "leave" || command == "suspend" || command == "resume" || command == "kill" ||
         command == "routes" || command == "log";
}

}  // namespace phoenix::shell
