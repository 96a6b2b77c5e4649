// ssh_known_hosts.hpp — an SSH gateway's host key checked against a known_hosts file, as OpenSSH does: plain
// and hashed entries, "[host]:port" for ports other than 22; a key of another type known for the host counts as
// a change. Under accept-new an unknown host's key is appended to the file; a changed key is refused under
// every policy, the message naming both SHA256 fingerprints.
#pragma once

#include <libssh2.h>

#include <string>

namespace phoenix::overlay {

// "" if the key `session` was presented is known for `host` (or, with accept_new, was unknown and is now
// recorded in `file`), else why it is refused. `log_name` starts the log lines.
std::string check_gateway_host_key(LIBSSH2_SESSION* session, const std::string& host, const std::string& file,
                                   bool accept_new, const std::string& log_name);

}  // namespace phoenix::overlay
