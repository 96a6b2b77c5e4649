// phoenix/shell/node_launch.cpp — see node_launch.hpp.
#include "phoenix/shell/node_launch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "phoenix/shell/command_line.hpp"

namespace phoenix::shell {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::optional<std::string> search(const std::string& app, const char* dirs) {
  if (!dirs) return std::nullopt;
  std::string_view rest = dirs;
  while (true) {
    const auto colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (dir.empty()) dir = ".";
    std::error_code ec;
    const auto candidate = std::filesystem::absolute(std::filesystem::path(dir) / app, ec).lexically_normal();
    if (!ec && is_executable_file(candidate.string())) return candidate.string();
    if (colon == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(colon + 1);
  }
}

}  // namespace

std::optional<std::string> resolve_app(const std::string& app, const char* app_path, const char* path) {
  if (app.empty()) return std::nullopt;
  if (app.find('/') != std::string::npos) {
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(app, ec).lexically_normal();
    if (ec || !is_executable_file(absolute.string())) return std::nullopt;
    return absolute.string();
  }
  if (auto found = search(app, app_path)) return found;
  return search(app, path);
}

std::string installed_apps_dir() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const auto dir = (self.parent_path() / PHOENIX_APPS_FROM_BIN).lexically_normal();
  // Not a directory others may write to (a phsh copied to /tmp/x/ would search /tmp/libexec/phoenix).
  struct stat st {};
  const bool ours =
      ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  return ours ? dir.string() : "";
}

std::string through_gateway(const std::string& endpoint, const std::string& via) {
  if (via.empty() || endpoint.rfind("tcp://", 0) != 0) return endpoint;
  std::string gateway = via;
  while (gateway.size() > 6 && gateway.back() == '/') gateway.pop_back();
  return gateway + "/" + endpoint.substr(6);
}

std::string with_host(const std::string& endpoint, const std::string& host) {
  const auto scheme = endpoint.find("://");
  if (scheme == std::string::npos || host.empty()) return endpoint;
  const auto start = scheme + 3;
  std::string bare = host.substr(host.find('@') == std::string::npos ? 0 : host.find('@') + 1);
  if (bare.find(':') != std::string::npos && bare.front() != '[') bare = "[" + bare + "]";  // IPv6 literal
  for (const std::string wildcard : {"0.0.0.0:", "[::]:"}) {
    if (endpoint.compare(start, wildcard.size(), wildcard) == 0)
      return endpoint.substr(0, start) + bare + endpoint.substr(start + wildcard.size() - 1);
  }
  return endpoint;
}

std::string listen_endpoint(bool remote, int port) {
  return std::string(remote ? "tcp://0.0.0.0:" : "tcp://127.0.0.1:") + std::to_string(port);
}

std::vector<std::string> node_environment(const NodeEnvironment& e) {
  std::string peers;
  for (const auto& p : e.peers) peers += (peers.empty() ? "" : ",") + p;
  std::vector<std::string> out = {
      "PHOENIX_NAME=" + e.name,
      "PHOENIX_LISTEN=" + e.listen,
      "PHOENIX_PEERS=" + peers,
      "PHOENIX_CLUSTER_KEY_FILE=" + e.key_file,
      "PHOENIX_SPACE_SIZE=" + std::to_string(e.space_size),
      "PHOENIX_RETRY_INTERVAL_MS=200",
      "PHSH_ROLE=" + e.role,
  };
  if (!e.control_key_file.empty()) out.push_back("PHOENIX_CONTROL_KEY_FILE=" + e.control_key_file);
  if (!e.resume_file.empty()) out.push_back("PHSH_RESUME_FILE=" + e.resume_file);
  out.insert(out.end(), e.extra.begin(), e.extra.end());
  return out;
}

std::string placement_host(const std::string& hosts, int process, int replica, int replicas) {
  std::vector<std::string> list;
  for (std::size_t start = 0; start <= hosts.size();) {
    const auto comma = std::min(hosts.find(',', start), hosts.size());
    if (comma > start) list.push_back(hosts.substr(start, comma - start));
    start = comma + 1;
  }
  if (list.empty()) return "";
  const int slot = replicas > 0 ? process * replicas + replica : process;
  return list[static_cast<std::size_t>(slot) % list.size()];
}

std::vector<std::string> ssh_argv(const std::vector<std::string>& ssh_command, const std::string& host,
                                  const std::string& workdir, const std::string& remote_dir,
                                  const std::vector<std::string>& environment,
                                  const std::vector<std::string>& command) {
  std::string remote;
  if (!workdir.empty()) remote = "cd " + shell_quote(workdir) + " 2>/dev/null; ";
  if (!remote_dir.empty()) remote += "mkdir -p " + shell_quote(remote_dir) + " && ";
  remote += "exec env";
  for (const auto& v : environment) remote += " " + shell_quote(v);
  for (const auto& w : command) remote += " " + shell_quote(w);
  std::vector<std::string> argv = ssh_command;
  argv.push_back(host);
  argv.push_back(remote);
  return argv;
}

}  // namespace phoenix::shell
