// phsh — the phoenix shell: starts node processes of an application, joins and leaves them while it runs, and
// shows the overlay (nodes, routes, links, the map of the virtual node space). Interactive with line editing,
// history and completion, or scripted: `phsh -c 'CMD; CMD'`, `phsh FILE` (one command per line, '#'
// comments), or commands on a stdin that is not a terminal. A script stops at the first failed command, with
// one error line and exit status 1; its node processes are then stopped.
//
// Usage: phsh [--config FILE] [--listen tcp://HOST:PORT] [--connect PEER]... [--key FILE] [--space L]
//             [--run-dir DIR] [--ssh-command CMD] [--echo] [-c CMDS | FILE]      (phsh --help; then `help`)
#include <spdlog/cfg/env.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "phoenix/launch/key_file.hpp"
#include "phoenix/shell/command_line.hpp"
#include "phoenix/shell/line_editor.hpp"
#include "phoenix/shell/session.hpp"

namespace {

using namespace phoenix::shell;

// Where a script's commands come from, for error lines ("" for -c and stdin).
struct Script {
  std::string origin;
  bool echo = false;
  bool interactive = false;
};

void error_line(const std::string& where, const std::string& what) {
  std::fprintf(stderr, "phsh: %s%s\n", where.c_str(), what.c_str());
  std::fflush(stderr);
}

// Runs the commands of one piece of script text. 1 after a failed command (reported), 0 otherwise; sets
// *quit when a quit command ran.
int run_text(Session& session, const std::string& text, const Script& script, int line_number, bool* quit) {
  for (const auto& line : split_commands(text)) {
    const std::string where =
        script.origin.empty() ? "" : script.origin + ":" + std::to_string(line_number) + ": ";
    const auto words = split_words(line);
    if (!words.ok()) {
      error_line(where, words.error);
      return 1;
    }
    const auto parsed = parse_command(words.words);
    if (!parsed.help.empty()) {
      std::fputs(parsed.help.c_str(), stdout);
      continue;
    }
    if (!parsed.ok()) {
      error_line(where, parsed.error);
      return 1;
    }
    if (script.echo) {
      std::string shown = "phsh>";
      for (const auto& w : words.words) shown += " " + shell_quote(w);
      std::printf("%s\n", shown.c_str());
      std::fflush(stdout);
    }
    if (parsed.command.name == "quit") {
      session.quit(parsed.command.stop);
      *quit = true;
      return 0;
    }
    if (auto error = session.run(parsed.command); !error.empty()) {
      if (script.interactive && error == "interrupted") std::fputs("\n", stderr);  // after the terminal's ^C
      error_line(where, error);
      return 1;
    }
    if (termination_signal()) {
      error_line("", "terminated");
      return 1;
    }
  }
  return 0;
}

// A script: stops at the first failed command, and then stops the node processes too (nobody is left to
// drive them). At its end without quit, the nodes keep running, as after quit.
int run_script(Session& session, std::istream& in, const Script& script, bool whole_text) {
  bool quit = false;
  int line_number = 0;
  auto fail = [&] {
    session.quit(true);
    return 1;
  };
  if (whole_text) {
    std::stringstream text;
    text << in.rdbuf();
    if (run_text(session, text.str(), script, 0, &quit) != 0) return fail();
  } else {
    for (std::string line; !quit && std::getline(in, line);) {
      if (run_text(session, line, script, ++line_number, &quit) != 0) return fail();
    }
  }
  if (!quit) session.quit(false);
  return 0;
}

std::vector<std::string> complete(const Session& session, const std::string& before) {
  const auto cut = before.rfind(';');
  const auto words = split_words(cut == std::string::npos ? before : before.substr(cut + 1)).words;
  std::vector<std::string> out;
  if (words.empty() || (words.size() == 1 && words[0] == "help")) {
    for (const auto& c : command_table()) out.push_back(c.name);
  } else if (takes_node_names(words[0])) {
    out = session.node_names();
  }
  return out;
}

int run_interactive(Session& session) {
  std::printf("phsh: shell node %s, L = %llu, run dir %s; help lists the commands\n",
              session.endpoint().c_str(), static_cast<unsigned long long>(session.space_size()),
              session.run_dir().c_str());
  const char* home = std::getenv("HOME");
  LineEditor editor(home ? std::filesystem::path(home) / ".phsh_history" : std::filesystem::path(),
                    [&](const std::string& before, const std::string&) { return complete(session, before); });
  session.set_event_printer([&](const std::string& line) { editor.print_above(line + "\n"); });
  while (true) {
    if (!editor.editing()) editor.start("phsh> ");
    bool woken = false;
    session.read_events(std::chrono::milliseconds(500), STDIN_FILENO, &woken);
    if (const int sig = termination_signal()) {
      editor.stop();
      std::printf("\n");
      session.quit(sig == SIGTERM);
      return 128 + sig;
    }
    if (take_interrupt()) {
      editor.cancel_line();
      continue;
    }
    if (!woken) continue;
    bool eof = false;
    const auto line = editor.read_available(&eof);
    if (eof) {
      std::printf("\n");
      session.quit(false);
      return 0;
    }
    if (!line) continue;
    bool quit = false;
    run_text(session, *line, Script{"", false, true}, 0, &quit);
    if (quit) return 0;
  }
}

std::string absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "phsh: the phoenix shell — start node processes, join and leave them live, see routes and placement"};
  std::string config_file, listen, key, run_dir, ssh_command, commands, script_file;
  std::vector<std::string> connect;
  std::uint64_t space = 0;
  bool echo = false;
  cli.add_option("--config", config_file, "TOML configuration of the shell's node (its top-level keys)")
      ->check(CLI::ExistingFile);
  cli.add_option("--listen", listen, "the shell node's endpoint (default tcp://127.0.0.1:0)");
  cli.add_option("--connect", connect, "a peer to link to: a node of an overlay already running");
  cli.add_option("--key", key, "the cluster key file (default: a fresh one in the run dir)")
      ->check(CLI::ExistingFile);
  cli.add_option("--space", space, "L, the size of the virtual node space")->check(CLI::PositiveNumber);
  cli.add_option("--run-dir", run_dir, "where node output, error and suspend files go (default /tmp/phsh-PID)");
  cli.add_option("--ssh-command", ssh_command,
                 "how to reach other hosts (default $PHSH_SSH or ssh -o BatchMode=yes)");
  cli.add_flag("--echo", echo, "print each command of a script before running it");
  auto* c_opt = cli.add_option("-c", commands, "run these commands (separated by ';' or newlines), then exit");
  cli.add_option("file", script_file, "run the commands of this file (one per line, # comments), then exit")
      ->check(CLI::ExistingFile)
      ->excludes(c_opt);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return cli.exit(e);  // --help
    error_line("", std::string(e.what()) + " (phsh --help lists the options)");
    return 2;
  }

  phoenix::Config config;
  if (!config_file.empty()) {
    auto loaded = phoenix::load_config(config_file);
    if (!loaded.ok()) {
      error_line("", loaded.error);
      return 2;
    }
    config = loaded.config;
  } else {
    config.log_level = "error";  // the shell's own node is quiet; a node's trouble shows in its own log
  }
  config.name = "phsh";
  if (!listen.empty()) config.listen = listen;
  if (space) config.space_size = space;
  if (const auto problem = phoenix::validate(config); !problem.empty()) {
    error_line("", problem);
    return 2;
  }

  SessionOptions options;
  try {
    options.run_dir = absolute(run_dir.empty() ? "/tmp/phsh-" + std::to_string(::getpid()) : run_dir);
    std::filesystem::create_directories(options.run_dir);
    if (!key.empty())
      config.cluster_key_file = absolute(key);
    else if (config.cluster_key_file.empty())
      config.cluster_key_file = phoenix::launch::write_cluster_key(options.run_dir / "cluster.key");
    // The controller's key pair: the shell signs kill, leave, suspend and log with the private key, the nodes
    // it starts check them with the public one (docs/shell.md, "Who may control a node").
    if (config.controller_key_file.empty()) {
      config.controller_key_file = (options.run_dir / "controller.key").string();
      config.control_key_file = (options.run_dir / "controller.pub").string();
      phoenix::launch::write_controller_keys(config.controller_key_file, config.control_key_file);
    } else if (config.control_key_file.empty()) {
      config.control_key_file = (options.run_dir / "controller.pub").string();
      phoenix::launch::write_controller_public_key(config.controller_key_file, config.control_key_file);
    }
  } catch (const std::exception& e) {
    error_line("", e.what());
    return 1;
  }
  if (ssh_command.empty()) {
    const char* env = std::getenv("PHSH_SSH");
    ssh_command = env && *env ? env : "ssh -o BatchMode=yes";
  }
  options.ssh_command = split_words(ssh_command).words;
  if (options.ssh_command.empty()) {
    error_line("", "--ssh-command is empty");
    return 2;
  }
  options.config = config;
  options.connect = connect;
  const bool terminal =
      commands.empty() && script_file.empty() && ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  options.interactive = terminal;

  install_signal_handlers();
  std::unique_ptr<Session> session;
  try {
    session = std::make_unique<Session>(options);
  } catch (const std::exception& e) {
    error_line("", e.what());
    return 1;
  }
  if (!commands.empty()) {
    std::istringstream in(commands);
    return run_script(*session, in, Script{"", echo}, true);
  }
  if (!script_file.empty()) {
    std::ifstream in(script_file);
    if (!in) {
      error_line("", "cannot read " + script_file);
      return 1;
    }
    return run_script(*session, in, Script{script_file, echo}, false);
  }
  if (terminal) return run_interactive(*session);
  return run_script(*session, std::cin, Script{"", echo}, false);
}
