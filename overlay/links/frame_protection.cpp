// overlay/links/frame_protection.cpp — see frame_protection.hpp.
#include "overlay/links/frame_protection.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/modes.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "overlay/links/frame.hpp"

namespace phoenix::overlay {
namespace {

// The block cipher the GCM mode functions call: one AES-256 block through the direction's ECB context (AES-NI
// where the CPU has it; constant time). It cannot fail once keyed, and a C callback cannot report a failure:
// a wrong block would only make tags fail, but a libcrypto that fails here is broken, so stop.
void aes_block(const unsigned char in[16], unsigned char out[16], const void* key) {
  auto* ctx = static_cast<EVP_CIPHER_CTX*>(const_cast<void*>(key));
  int len = 0;
  if (EVP_EncryptUpdate(ctx, out, &len, in, 16) != 1 || len != 16) {
    std::fputs("phoenix: AES block encryption failed in libcrypto\n", stderr);
    std::abort();
  }
}

}  // namespace

frame_protection::direction frame_protection::keyed(const secret_bytes& key) {
  direction d;
  d.block = EVP_CIPHER_CTX_new();
  if (!d.block || EVP_EncryptInit_ex(d.block, EVP_aes_256_ecb(), nullptr, key.data(), nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(d.block, 0) != 1 || !(d.gcm = CRYPTO_gcm128_new(d.block, aes_block))) {
    release(d);
    throw std::runtime_error("AES-256-GMAC setup failed");
  }
  return d;
}

frame_protection::frame_protection(const link_keys& keys) {
  if (keys.mode == protection_mode::off) return;
  send_ = keyed(keys.send);
  try {
    receive_ = keyed(keys.receive);
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
      opening_(std::exchange(other.opening_, false)),
      sealing_(std::exchange(other.sealing_, false)) {}

frame_protection& frame_protection::operator=(frame_protection&& other) noexcept {
  if (this != &other) {
    release(send_);
    release(receive_);
    send_ = std::exchange(other.send_, {});
    receive_ = std::exchange(other.receive_, {});
    opening_ = std::exchange(other.opening_, false);
    sealing_ = std::exchange(other.sealing_, false);
  }
  return *this;
}

void frame_protection::release(direction& d) {
  if (d.gcm) CRYPTO_gcm128_release(d.gcm);  // wipes the hash key and its tables
  EVP_CIPHER_CTX_free(d.block);             // wipes the key schedule
  d.gcm = nullptr;
  d.block = nullptr;
}

// GMAC: AES-GCM over additional data only. The 96-bit nonce is the frame number (little-endian) and four zero
// bytes; each direction has its own key, so a number is never used twice under one key.
void frame_protection::begin(direction& d) {
  if (d.count == UINT64_MAX) throw std::runtime_error("frame counter exhausted");
  std::array<unsigned char, 12> nonce{};
  base::store_le<std::uint64_t>(reinterpret_cast<std::byte*>(nonce.data()), d.count++);
  CRYPTO_gcm128_setiv(d.gcm, nonce.data(), nonce.size());
}

void frame_protection::add(direction& d, std::span<const std::byte> piece) {
  // Fails only past 2^61 bytes of additional data, which no frame reaches.
  if (CRYPTO_gcm128_aad(d.gcm, reinterpret_cast<const unsigned char*>(piece.data()), piece.size()) != 0) {
    throw std::runtime_error("AES-256-GMAC failed");
  }
}

frame_tag frame_protection::finish(direction& d) {
  frame_tag tag{};
  CRYPTO_gcm128_tag(d.gcm, reinterpret_cast<unsigned char*>(tag.data()), tag.size());
  return tag;
}

// Begins the next frame of `d` with its first pieces; false when `d` is off (nothing is tagged).
bool frame_protection::begin_with(direction& d, frame_pieces pieces) {
  if (!d.gcm) return false;
  begin(d);
  for (const auto& piece : pieces) add(d, piece);
  return true;
}

frame_tag frame_protection::tag_of(direction& d, frame_pieces pieces) {
  begin_with(d, pieces);
  return finish(d);
}

frame_tag frame_protection::seal(frame_pieces pieces) { return tag_of(send_, pieces); }

void frame_protection::seal_begin(frame_pieces pieces) { sealing_ = begin_with(send_, pieces); }

void frame_protection::seal_more(std::span<const std::byte> piece) {
  if (sealing_) add(send_, piece);
}

frame_tag frame_protection::seal_finish() {
  if (!sealing_) throw std::logic_error("seal_finish without seal_begin");
  sealing_ = false;
  return finish(send_);
}

bool frame_protection::open(frame_pieces pieces, std::span<const std::byte> tag) {
  if (!receive_.gcm) return tag.empty();
  if (tag.size() != frame_tag_bytes) return false;
  const frame_tag expected = tag_of(receive_, pieces);
  return CRYPTO_memcmp(expected.data(), tag.data(), expected.size()) == 0;
}

void frame_protection::open_begin(frame_pieces pieces) { opening_ = begin_with(receive_, pieces); }

void frame_protection::open_more(std::span<const std::byte> piece) {
  if (opening_) add(receive_, piece);
}

bool frame_protection::open_finish(std::span<const std::byte> tag) {
  if (!receive_.gcm) return tag.empty();
  opening_ = false;
  const frame_tag expected = finish(receive_);
  return tag.size() == frame_tag_bytes && CRYPTO_memcmp(expected.data(), tag.data(), expected.size()) == 0;
}

}  // namespace phoenix::overlay
