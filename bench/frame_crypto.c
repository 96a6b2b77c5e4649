/* bench/frame_crypto.c — what protecting a frame costs, per byte and per frame, for each way libcrypto offers:
 * AES-256-GMAC (AES-GCM over additional data only: phoenix's link_protection = "integrity") through EVP and
 * through the GCM mode functions over an EVP ECB block (as phoenix computes it), AES-256-GCM and
 * ChaCha20-Poly1305 encrypting the body, ChaCha20-Poly1305 over additional data only, and HMAC-SHA256. The
 * choice of phoenix's default rests on these figures (docs/security.md, bench/README.md "frame_crypto").
 *
 * Usage: frame_crypto [--quick]
 * Prints one line per way and size: "RESULT <way> <size_bytes> <MB/s> MB/s <ns> ns/frame", each the best of
 * five timed runs of about 0.2 s (0.01 s with --quick), on one core. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/modes.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum way { gmac, gcm128_gmac, aes_gcm, chacha_aad, chacha, hmac_sha256, ways };
static const char* const way_names[ways] = {"aes256-gmac",           "gcm128-gmac",
                                            "aes256-gcm-encrypt",    "chacha20-poly1305-aad",
                                            "chacha20-poly1305-encrypt", "hmac-sha256"};

static unsigned char key[32], nonce[12], tag[32];

/* The block function of the GCM mode functions: one AES-256 block through a keyed ECB context. */
static void aes_block(const unsigned char in[16], unsigned char out[16], const void* ecb) {
  int len = 0;
  if (EVP_EncryptUpdate((EVP_CIPHER_CTX*)ecb, out, &len, in, 16) != 1) abort();
}
static GCM128_CONTEXT* gcm128;

/* One frame's protection: as the link does it, the cipher keyed once, only the nonce set per frame. */
static int protect(enum way w, EVP_CIPHER_CTX* ctx, const unsigned char* in, unsigned char* out, int n) {
  int len = 0;
  if (w == hmac_sha256) {
    unsigned int mac_len = 0;
    return HMAC(EVP_sha256(), key, sizeof key, in, (size_t)n, tag, &mac_len) != NULL;
  }
  nonce[0]++;
  if (w == gcm128_gmac) {
    CRYPTO_gcm128_setiv(gcm128, nonce, sizeof nonce);
    if (CRYPTO_gcm128_aad(gcm128, in, (size_t)n) != 0) return 0;
    CRYPTO_gcm128_tag(gcm128, tag, 16);
    return 1;
  }
  if (EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce) != 1) return 0;
  const int aad_only = w == gmac || w == chacha_aad;
  if (EVP_EncryptUpdate(ctx, aad_only ? NULL : out, &len, in, n) != 1) return 0;
  if (EVP_EncryptFinal_ex(ctx, out, &len) != 1) return 0;
  return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) == 1;
}

int main(int argc, char** argv) {
  const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  if (argc > 2 || (argc == 2 && !quick)) {
    fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
    return 2;
  }
  const double run_s = quick ? 0.01 : 0.2;
  const int sizes[] = {64, 1024, 65536, 1048576};
  const size_t max = 1048576;
  unsigned char* in = malloc(max);
  unsigned char* out = malloc(max + 16);
  if (!in || !out) return 1;
  for (size_t i = 0; i < max; ++i) in[i] = (unsigned char)(i * 131);
  for (int w = 0; w < ways; ++w) {
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    const EVP_CIPHER* cipher = w == gcm128_gmac             ? EVP_aes_256_ecb()
                               : w == gmac || w == aes_gcm ? EVP_aes_256_gcm()
                                                           : EVP_chacha20_poly1305();
    if (!ctx || (w != hmac_sha256 && EVP_EncryptInit_ex(ctx, cipher, NULL, key, NULL) != 1) ||
        (w == gcm128_gmac && !(gcm128 = CRYPTO_gcm128_new(ctx, aes_block)))) {
      fprintf(stderr, "frame_crypto: FAILED to set up %s\n", way_names[w]);
      return 1;
    }
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
      const int n = sizes[s];
      double best_s = 1e9;
      long best_frames = 1;
      for (int rep = 0; rep < 5; ++rep) {
        long frames = 0;
        const double start = now_s();
        double elapsed = 0;
        do {
          for (int k = 0; k < 16; ++k, ++frames) {
            if (!protect((enum way)w, ctx, in, out, n)) {
              fprintf(stderr, "frame_crypto: FAILED in %s\n", way_names[w]);
              return 1;
            }
          }
          elapsed = now_s() - start;
        } while (elapsed < run_s);
        if (elapsed / (double)frames < best_s / (double)best_frames) {
          best_s = elapsed;
          best_frames = frames;
        }
      }
      const double per_frame_s = best_s / (double)best_frames;
      printf("RESULT %s %d %.0f MB/s %.0f ns/frame\n", way_names[w], n, (double)n / per_frame_s / 1e6,
             per_frame_s * 1e9);
      fflush(stdout);
    }
    if (w == gcm128_gmac) CRYPTO_gcm128_release(gcm128);
    EVP_CIPHER_CTX_free(ctx);
  }
  free(in);
  free(out);
  return 0;
}
