// Tests of phoenix/shell/command_line.hpp and node_launch.hpp: words and quotes, scripts split into commands,
// each command's options (and the rejection of bad ones), and how a node process is started: its program,
// environment, peers through a gateway and the ssh command line. No network, no processes.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "phoenix/shell/command_line.hpp"
#include "phoenix/shell/node_launch.hpp"

using namespace phoenix::shell;
using Strings = std::vector<std::string>;

namespace {

ParsedCommand parse(const std::string& line) {
  const auto words = split_words(line);
  REQUIRE(words.ok());
  return parse_command(words.words);
}

}  // namespace

TEST_CASE("words: blanks, quotes, escapes and comments") {
  CHECK(split_words("spawn  -n 2\traytrace").words == Strings{"spawn", "-n", "2", "raytrace"});
  CHECK(split_words("spawn app 'a b' \"c d\" e\\ f").words == Strings{"spawn", "app", "a b", "c d", "e f"});
  CHECK(split_words("say 'it''s'").words == Strings{"say", "its"});
  CHECK(split_words("say \"a \\\"q\\\" b\"").words == Strings{"say", "a \"q\" b"});
  CHECK(split_words("say 'no \\ escape'").words == Strings{"say", "no \\ escape"});
  CHECK(split_words("x'y'z").words == Strings{"xyz"});
  CHECK(split_words("nodes # the table").words == Strings{"nodes"});
  CHECK(split_words("echo a#b").words == Strings{"echo", "a#b"});
  CHECK(split_words("arg ''").words == Strings{"arg", ""});
  CHECK(split_words("   ").words.empty());
  CHECK_FALSE(split_words("spawn 'open").ok());
  CHECK_FALSE(split_words("spawn \"open").ok());
}

TEST_CASE("scripts: semicolons and newlines separate commands, not inside quotes or comments") {
  CHECK(split_commands("spawn -n 2 app; nodes;map") == Strings{"spawn -n 2 app", " nodes", "map"});
  CHECK(split_commands("# a comment; not a command\nnodes\n\n  # another\nwait --timeout 5 # tail; x\n") ==
        Strings{"nodes", "wait --timeout 5 "});
  CHECK(split_commands("spawn app 'a;b' \"c;d\"") == Strings{"spawn app 'a;b' \"c;d\""});
  CHECK(split_commands("spawn app a\\;b") == Strings{"spawn app a\\;b"});
  CHECK(split_words(split_commands("spawn app a\\;b")[0]).words == Strings{"spawn", "app", "a;b"});
  CHECK(split_commands(";;\n;").empty());
}

TEST_CASE("spawn: options before APP, everything after it is the application's") {
  const auto p =
      parse("spawn -n 3 --host alice@far --via ssh://gw:2222 --port 7000 raytrace --grain 16 -o x.png s");
  REQUIRE(p.ok());
  const auto& c = p.command;
  CHECK(c.name == "spawn");
  CHECK(c.count == 3);
  CHECK(c.host == "alice@far");
  CHECK(c.via == "ssh://gw:2222");
  CHECK(c.port == 7000);
  CHECK(c.app == "raytrace");
  CHECK(c.args == Strings{"--grain", "16", "-o", "x.png", "s"});
  CHECK(parse("spawn app").command.count == 1);
  CHECK(parse("spawn -- app -n 2").command.args == Strings{"-n", "2"});
}

TEST_CASE("bad options and arguments are rejected with the command's name") {
  auto error_of = [](const std::string& line) {
    const auto p = parse(line);
    CHECK_FALSE(p.ok());
    return p.error;
  };
  CHECK(error_of("spawn").find("spawn: missing APP") == 0);
  CHECK(error_of("spawn --bogus app").find("unknown option '--bogus'") != std::string::npos);
  CHECK(error_of("spawn -n 0 app").rfind("spawn: ", 0) == 0);
  CHECK(error_of("spawn -n two app").rfind("spawn: ", 0) == 0);
  CHECK(error_of("spawn --via tcp://gw app").find("--via must be ssh://") != std::string::npos);
  CHECK(error_of("spawn --port 70000 app").rfind("spawn: ", 0) == 0);
  CHECK(error_of("spawn -n 3 --port 65534 app").find("exceed 65535") != std::string::npos);
  CHECK(error_of("leave").rfind("leave: ", 0) == 0);
  CHECK(error_of("suspend n1 n2").rfind("suspend: ", 0) == 0);
  CHECK(error_of("sleep").rfind("sleep: ", 0) == 0);
  CHECK(error_of("sleep -1").rfind("sleep: ", 0) == 0);
  CHECK(error_of("nodes extra").rfind("nodes: ", 0) == 0);
  CHECK(error_of("wait --timeout 0").rfind("wait: ", 0) == 0);
  CHECK(error_of("foo") == "unknown command 'foo' (try help)");
}

TEST_CASE("the other commands' arguments") {
  CHECK(parse("leave n1 n2 --timeout 5").command.nodes == Strings{"n1", "n2"});
  CHECK(*parse("leave n1 n2 --timeout 5").command.timeout == doctest::Approx(5));
  CHECK_FALSE(parse("wait").command.timeout.has_value());
  const auto r = parse("resume n3 --port 9000 --host far");
  REQUIRE(r.ok());
  CHECK(r.command.nodes == Strings{"n3"});
  CHECK(r.command.port == 9000);
  CHECK(r.command.host == "far");
  CHECK(parse("log n2 10").command.lines == 10);
  CHECK(parse("log n2").command.lines == 50);
  CHECK(parse("dot out.dot --png").command.png);
  CHECK(parse("dot out.dot").command.file == "out.dot");
  CHECK(parse("quit --stop").command.stop);
  CHECK_FALSE(parse("quit").command.stop);
  CHECK(parse("watch --for 2.5").command.seconds == doctest::Approx(2.5));
  CHECK(parse("sleep 0.5").command.seconds == doctest::Approx(0.5));
  CHECK(parse("help spawn").command.topic == "spawn");
  CHECK(parse_command({}).command.name.empty());
}

TEST_CASE("help: every command listed, per-command help, --help") {
  const std::string all = help_text();
  for (const auto& c : command_table()) CHECK(all.find(c.usage) != std::string::npos);
  CHECK(help_text("spawn").find("--host") != std::string::npos);
  CHECK(help_text("nope").find("no command 'nope'") == 0);
  const auto p = parse("leave --help");
  CHECK(p.ok());
  CHECK(p.help.find("--timeout") != std::string::npos);
  CHECK(takes_node_names("leave"));
  CHECK_FALSE(takes_node_names("spawn"));
}

TEST_CASE("shell quoting round-trips through split_words") {
  for (const std::string w : {"plain", "with space", "it's", "$HOME", "a\"b", "", "tcp://127.0.0.1:1,x=y"}) {
    const auto back = split_words("x " + shell_quote(w)).words;
    REQUIRE(back.size() == 2);
    CHECK(back[1] == w);
  }
  CHECK(shell_quote("PHOENIX_NAME=n1") == "PHOENIX_NAME=n1");
  CHECK(shell_quote("a b") == "'a b'");
}

TEST_CASE("node launch: gateway peers, wildcard hosts, listen endpoints, environment") {
  CHECK(through_gateway("tcp://10.0.0.5:4000", "ssh://bob@gw:2222") == "ssh://bob@gw:2222/10.0.0.5:4000");
  CHECK(through_gateway("tcp://10.0.0.5:4000", "ssh://gw/") == "ssh://gw/10.0.0.5:4000");
  CHECK(through_gateway("tcp://10.0.0.5:4000", "") == "tcp://10.0.0.5:4000");
  CHECK(through_gateway("ssh://gw/h:1", "ssh://other") == "ssh://gw/h:1");
  CHECK(with_host("tcp://0.0.0.0:4000", "alice@far") == "tcp://far:4000");
  CHECK(with_host("tcp://127.0.0.1:4000", "far") == "tcp://127.0.0.1:4000");
  CHECK(with_host("tcp://0.0.0.0:4000", "") == "tcp://0.0.0.0:4000");
  CHECK(listen_endpoint(false, 0) == "tcp://127.0.0.1:0");
  CHECK(listen_endpoint(true, 7000) == "tcp://0.0.0.0:7000");
  NodeEnvironment e;
  e.name = "n2";
  e.listen = "tcp://127.0.0.1:0";
  e.peers = {"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"};
  e.key_file = "/tmp/k";
  e.space_size = 1024;
  e.role = "resume";
  e.resume_file = "/tmp/n2.suspend";
  e.control_key_file = "/tmp/c.pub";
  CHECK(node_environment(e) == Strings{"PHOENIX_NAME=n2", "PHOENIX_LISTEN=tcp://127.0.0.1:0",
                                       "PHOENIX_PEERS=tcp://127.0.0.1:1,tcp://127.0.0.1:2",
                                       "PHOENIX_CLUSTER_KEY_FILE=/tmp/k", "PHOENIX_SPACE_SIZE=1024",
                                       "PHOENIX_RETRY_INTERVAL_MS=200", "PHSH_ROLE=resume",
                                       "PHOENIX_CONTROL_KEY_FILE=/tmp/c.pub", "PHSH_RESUME_FILE=/tmp/n2.suspend"});
  e.resume_file.clear();
  e.control_key_file.clear();
  CHECK(node_environment(e).size() == 7);
}

TEST_CASE("node launch: replicas of a process on different hosts where there are enough, the rest in turn") {
  // Plain nodes: the hosts in turn.
  CHECK(placement_host("a,b", 0, 0, 0) == "a");
  CHECK(placement_host("a,b", 1, 0, 0) == "b");
  CHECK(placement_host("a,b", 2, 0, 0) == "a");
  CHECK(placement_host("", 3, 0, 0) == "");
  CHECK(placement_host("solo", 5, 1, 2) == "solo");
  // 3 processes x 2 replicas on 3 hosts: the two replicas of every process on different hosts, each host
  // holding 2 replicas.
  std::map<std::string, int> load;
  for (int p = 0; p < 3; ++p) {
    const auto r0 = placement_host("a,b,c", p, 0, 2), r1 = placement_host("a,b,c", p, 1, 2);
    CHECK(r0 != r1);
    ++load[r0];
    ++load[r1];
  }
  CHECK(load == std::map<std::string, int>{{"a", 2}, {"b", 2}, {"c", 2}});
  // Fewer hosts than replicas: they double up, still spread.
  CHECK(placement_host("a,b", 0, 2, 3) == "a");
  CHECK(placement_host("a,,b", 0, 1, 2) == "b");  // empty items are skipped
}

TEST_CASE("spawn --replicas parses, with its bounds") {
  const auto p = parse("spawn -n 3 --replicas 2 --host a,b,c ring 1000 300");
  REQUIRE(p.ok());
  CHECK(p.command.replicas == 2);
  CHECK(p.command.count == 3);
  CHECK(p.command.host == "a,b,c");
  CHECK(p.command.app == "ring");
  CHECK(p.command.args == Strings{"1000", "300"});
  CHECK(parse("spawn ring").command.replicas == 0);
  CHECK_FALSE(parse("spawn --replicas 0 ring").ok());
  CHECK_FALSE(parse("spawn --replicas 17 ring").ok());
}

TEST_CASE("node launch: the ssh command line is one remote shell command") {
  const auto argv =
      ssh_argv({"ssh", "-o", "BatchMode=yes"}, "alice@far", "/home/a/my work", "/tmp/phsh-1",
               {"PHOENIX_NAME=n1", "PHOENIX_PEERS=tcp://a:1,tcp://b:2"}, {"/opt/app", "my scene"});
  REQUIRE(argv.size() == 5);
  CHECK(argv[3] == "alice@far");
  CHECK(argv[4] ==
        "cd '/home/a/my work' 2>/dev/null; mkdir -p /tmp/phsh-1 && exec env PHOENIX_NAME=n1 "
        "PHOENIX_PEERS=tcp://a:1,tcp://b:2 /opt/app 'my scene'");
  CHECK(ssh_argv({"ssh"}, "far", "", "", {}, {"/opt/app"}).back() == "exec env /opt/app");
}

TEST_CASE("node launch: APP found as a path, in PHSH_APP_PATH, then in PATH") {
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / "phsh-test-XXXXXX").string();
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  const fs::path dir = pattern;
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  for (const auto& p : {dir / "a" / "tool", dir / "b" / "tool", dir / "b" / "other"}) {
    std::ofstream(p) << "#!/bin/sh\n";
    ::chmod(p.c_str(), 0755);
  }
  std::ofstream(dir / "a" / "plain") << "not executable\n";
  const std::string a = (dir / "a").string(), b = (dir / "b").string();
  CHECK(resolve_app("tool", a.c_str(), b.c_str()) == (dir / "a" / "tool").string());
  CHECK(resolve_app("other", a.c_str(), b.c_str()) == (dir / "b" / "other").string());
  CHECK(resolve_app("tool", nullptr, (a + ":" + b).c_str()) == (dir / "a" / "tool").string());
  CHECK_FALSE(resolve_app("plain", a.c_str(), nullptr).has_value());
  CHECK_FALSE(resolve_app("missing", a.c_str(), b.c_str()).has_value());
  CHECK(resolve_app((dir / "b" / "other").string(), nullptr, nullptr) == (dir / "b" / "other").string());
  CHECK_FALSE(resolve_app((dir / "b" / "none").string(), nullptr, nullptr).has_value());
  fs::remove_all(dir);
}

TEST_CASE("split_words: $NAME, ${NAME} and ${NAME:-DEFAULT} expand outside single quotes, as in sh") {
  const phoenix::shell::EnvLookup env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "SIZE") return std::string("640");
    if (name == "EMPTY") return std::string();
    return std::nullopt;
  };
  auto words = [&](std::string_view line) { return phoenix::shell::split_words(line, env).words; };
  CHECK(words("spawn raytrace --width $SIZE") ==
        std::vector<std::string>{"spawn", "raytrace", "--width", "640"});
  CHECK(words("x${SIZE}y \"a $SIZE b\"") == std::vector<std::string>{"x640y", "a 640 b"});
  CHECK(words("${UNSET:-1280} ${EMPTY:-7} ${SIZE:-1}") == std::vector<std::string>{"1280", "7", "640"});
  CHECK(words("'$SIZE' \\$SIZE \"\\$SIZE\" $ a$") ==
        std::vector<std::string>{"$SIZE", "$SIZE", "$SIZE", "$", "a$"});
  CHECK(words("[$UNSET]") == std::vector<std::string>{"[]"});
  CHECK_FALSE(phoenix::shell::split_words("${SIZE", env).ok());
  CHECK_FALSE(phoenix::shell::split_words("${A B}", env).ok());
}
