// controller_key.cpp — see controller_key.hpp. OpenSSL 3: Ed25519 signs with EVP_DigestSign and a NULL digest.
#include "phoenix/controller_key.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstring>

#include "overlay/links/frame.hpp"

namespace phoenix {
namespace {

constexpr std::string_view label{"phoenix control request v1\0", 27};

std::shared_ptr<EVP_PKEY> own(EVP_PKEY* k) { return {k, EVP_PKEY_free}; }

std::string pem_of(EVP_PKEY* key, bool private_part) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio) return "";
  const int ok = private_part ? PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)
                              : PEM_write_bio_PUBKEY(bio.get(), key);
  if (ok != 1) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : "";
}

}  // namespace

Bytes sealed_bytes(const control_seal& s, std::string_view text) {
  Bytes b(label.size() + 8 + 8 + s.nonce.size() + text.size());
  std::memcpy(b.data(), label.data(), label.size());
  std::byte* at = b.data() + label.size();
  base::store_le<std::uint64_t>(at, s.target);
  base::store_le<std::uint64_t>(at + 8, s.timestamp_ms);
  std::memcpy(at + 16, s.nonce.data(), s.nonce.size());
  if (!text.empty()) std::memcpy(at + 16 + s.nonce.size(), text.data(), text.size());
  return b;
}

controller_key controller_key::from_pem(std::string_view pem, bool want_private, std::string* error) {
  auto fail = [&](std::string why) {
    if (error) *error = std::move(why);
    return controller_key{};
  };
  if (pem.size() > 64 * 1024) return fail("the key text is larger than 64 KiB");
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                BIO_free);
  if (!bio) return fail("out of memory");
  EVP_PKEY* raw = want_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                               : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  if (!raw)
    return fail(want_private ? "no PEM private key (-----BEGIN PRIVATE KEY-----) in it"
                             : "no PEM public key (-----BEGIN PUBLIC KEY-----) in it");
  controller_key k;
  k.key_ = own(raw);
  k.private_ = want_private;
  if (EVP_PKEY_get_base_id(raw) != EVP_PKEY_ED25519) return fail("the key is not an Ed25519 key");
  return k;
}

controller_key controller_key::generate() {
  controller_key k;
  if (EVP_PKEY* raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")) {
    k.key_ = own(raw);
    k.private_ = true;
  }
  return k;
}

std::string controller_key::public_pem() const { return key_ ? pem_of(key_.get(), false) : ""; }
std::string controller_key::private_pem() const { return can_sign() ? pem_of(key_.get(), true) : ""; }

void controller_key::seal(control_packet& p, std::uint64_t target, std::uint64_t now_ms,
                          const control_nonce& nonce) const {
  control_seal s;
  s.target = target;
  s.timestamp_ms = now_ms;
  s.nonce = nonce;
  const Bytes msg = sealed_bytes(s, p.text);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::size_t length = s.signature.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(s.signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) != 1) {
    s.signature.fill(std::byte{0});  // verifies nowhere: the node refuses it as unsigned by its controller
  }
  p.seal = s;
}

bool controller_key::verifies(const control_packet& p) const {
  if (!key_ || !p.seal) return false;
  const Bytes msg = sealed_bytes(*p.seal, p.text);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(p.seal->signature.data()),
                          p.seal->signature.size(), reinterpret_cast<const unsigned char*>(msg.data()),
                          msg.size()) == 1;
}

}  // namespace phoenix
