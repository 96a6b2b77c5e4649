// overlay/frame_protection.cpp — see frame_protection.hpp.
#include "overlay/frame_protection.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <utility>

#include "overlay/frame.hpp"

namespace phoenix::overlay {
namespace {

EVP_CIPHER_CTX* keyed_context(const secret_bytes& key) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (!ctx || EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    throw std::runtime_error("AES-256-GCM setup failed");
  }
  return ctx;
}

}  // namespace

frame_protection::frame_protection(const link_keys& keys) {
  if (keys.mode == protection_mode::off) return;
  send_.ctx = keyed_context(keys.send);
  try {
    receive_.ctx = keyed_context(keys.receive);
  } catch (...) {
    release(send_);
    throw;
  }
}

frame_protection::~frame_protection() {
  release(send_);
  release(receive_);
}

frame_protection::frame_protection(frame_protection&& other) noexcept
    : send_(std::exchange(other.send_, {})),
      receive_(std::exchange(other.receive_, {})),
      opening_(std::exchange(other.opening_, false)) {}

frame_protection& frame_protection::operator=(frame_protection&& other) noexcept {
  if (this != &other) {
    release(send_);
    release(receive_);
    send_ = std::exchange(other.send_, {});
    receive_ = std::exchange(other.receive_, {});
    opening_ = std::exchange(other.opening_, false);
  }
  return *this;
}

void frame_protection::release(direction& d) {
  EVP_CIPHER_CTX_free(d.ctx);  // also wipes the key schedule
  d.ctx = nullptr;
}

// GMAC: AES-GCM over additional data only. The 96-bit nonce is the frame number (little-endian) and four zero
// bytes; each direction has its own key, so a number is never used twice under one key.
void frame_protection::begin(direction& d) {
  if (d.count == UINT64_MAX) throw std::runtime_error("frame counter exhausted");
  std::array<unsigned char, 12> nonce{};
  store_le<std::uint64_t>(reinterpret_cast<std::byte*>(nonce.data()), d.count++);
  if (EVP_EncryptInit_ex(d.ctx, nullptr, nullptr, nullptr, nonce.data()) != 1) {
    throw std::runtime_error("AES-256-GMAC failed");
  }
}

void frame_protection::add(direction& d, std::span<const std::byte> piece) {
  int len = 0;
  for (std::size_t done = 0; done < piece.size();) {  // EVP takes int lengths
    const std::size_t n = std::min<std::size_t>(piece.size() - done, INT_MAX / 2);
    if (EVP_EncryptUpdate(d.ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(piece.data() + done),
                          static_cast<int>(n)) != 1) {
      throw std::runtime_error("AES-256-GMAC failed");
    }
    done += n;
  }
}

frame_tag frame_protection::finish(direction& d) {
  unsigned char unused[16];
  int len = 0;
  frame_tag tag{};
  if (EVP_EncryptFinal_ex(d.ctx, unused, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(d.ctx, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag.size()), tag.data()) != 1) {
    throw std::runtime_error("AES-256-GMAC failed");
  }
  return tag;
}

frame_tag frame_protection::tag_of(direction& d, frame_pieces pieces) {
  begin(d);
  for (const auto& piece : pieces) add(d, piece);
  return finish(d);
}

frame_tag frame_protection::seal(frame_pieces pieces) { return tag_of(send_, pieces); }

bool frame_protection::open(frame_pieces pieces, std::span<const std::byte> tag) {
  if (!receive_.ctx) return tag.empty();
  if (tag.size() != frame_tag_bytes) return false;
  const frame_tag expected = tag_of(receive_, pieces);
  return CRYPTO_memcmp(expected.data(), tag.data(), expected.size()) == 0;
}

void frame_protection::open_begin(frame_pieces pieces) {
  if (!receive_.ctx) return;
  begin(receive_);
  for (const auto& piece : pieces) add(receive_, piece);
  opening_ = true;
}

void frame_protection::open_more(std::span<const std::byte> piece) {
  if (opening_) add(receive_, piece);
}

bool frame_protection::open_finish(std::span<const std::byte> tag) {
  if (!receive_.ctx) return tag.empty();
  opening_ = false;
  const frame_tag expected = finish(receive_);
  return tag.size() == frame_tag_bytes && CRYPTO_memcmp(expected.data(), tag.data(), expected.size()) == 0;
}

}  // namespace phoenix::overlay
