// controller_key.hpp — the controller's Ed25519 key, and the seal it puts on a control request.
//
// Nodes hold the public half only, so a node (or anyone who has the cluster key) cannot forge the controller's
// requests. The signature covers a domain-separation label and every field that decides what a request does:
//   "phoenix control request v1\0" || u64 target || u64 timestamp_ms || nonce (16) || text
// (integers little-endian; the text is last, so no length is needed). The request id is not covered: it only
// pairs a reply with its call.
//
// Pure: no files, no clock, no randomness (the caller passes the time and the nonce). Keys are immutable once
// made, so one may be shared between threads. Errors are values: an empty key and a one-line reason.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "phoenix/control.hpp"

typedef struct evp_pkey_st EVP_PKEY;

namespace phoenix {

class controller_key {
 public:
  controller_key() = default;
  // A key from PEM text: a private key ("-----BEGIN PRIVATE KEY-----", the controller's) when want_private,
  // else a public key ("-----BEGIN PUBLIC KEY-----", a node's). Empty, with *error set, if the text holds no
  // such Ed25519 key.
  static controller_key from_pem(std::string_view pem, bool want_private, std::string* error);
  // A fresh key pair (tests, tools).
  static controller_key generate();

  bool empty() const { return !key_; }
  bool can_sign() const { return key_ && private_; }
  std::string public_pem() const;  // "" when empty
  std::string private_pem() const;  // "" unless can_sign()

  // Seals request `p` for the node `target` at `now_ms`. Precondition: can_sign().
  void seal(control_packet& p, std::uint64_t target, std::uint64_t now_ms, const control_nonce& nonce) const;
  // Whether p carries a seal this key's private half made over p's fields.
  bool verifies(const control_packet& p) const;

 private:
  std::shared_ptr<EVP_PKEY> key_;
  bool private_ = false;
};

// The bytes a seal signs (see above).
Bytes sealed_bytes(const control_seal& s, std::string_view text);

}  // namespace phoenix
