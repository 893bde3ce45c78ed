#include "common/crypto.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

namespace gpufleet {
namespace {
std::string ToHex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}
// The bytes of lower- or upper-case hex; empty on anything else.
std::string FromHex(std::string_view hex) {
  if (hex.size() % 2) return {};
  std::string out;
  out.reserve(hex.size() / 2);
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return {};
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

constexpr std::string_view kSealed = "enc:v1:";
constexpr size_t kNonce = 12, kTag = 16;

}  // namespace

std::string RandomHex(size_t bytes) {
  std::string buf(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(buf.data()), static_cast<int>(bytes)) != 1) {
    throw std::runtime_error("RAND_bytes failed");  // a broken CSPRNG is a bug, not input
  }
  return ToHex(reinterpret_cast<const unsigned char*>(buf.data()), bytes);
}

std::string Base64Encode(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  return ToHex(digest, len);
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

Result<std::string> LoadOrCreateKey(const std::string& path) {
  std::ifstream in(path);
  if (in) {
    std::string line;
    std::getline(in, line);
    if (line.size() != 64 || FromHex(line).size() != 32) {
      return MakeError(ErrorCode::kInvalidArgument,
                       path +
                           " is not a key (64 hex digits); it is never replaced, so move it "
                           "away only if nothing was sealed with it");
    }
    return line;
  }
  std::string key = RandomHex(32);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return MakeError(ErrorCode::kUnavailable, "cannot create " + path);
  std::string text = key + "\n";
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok) return MakeError(ErrorCode::kUnavailable, "cannot write " + path);
  return key;
}

bool IsSealed(std::string_view text) { return text.substr(0, kSealed.size()) == kSealed; }

std::string SealSecret(std::string_view key_hex, std::string_view plaintext) {
  std::string key = FromHex(key_hex);
  if (key.size() != 32) throw std::invalid_argument("SealSecret needs a 32-byte key");
  unsigned char nonce[kNonce];
  if (RAND_bytes(nonce, kNonce) != 1) throw std::runtime_error("RAND_bytes failed");
  std::string out(plaintext.size(), '\0');
  unsigned char tag[kTag];
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0, total = 0;
  bool ok =
      ctx &&
      EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                         reinterpret_cast<const unsigned char*>(key.data()), nonce) &&
      EVP_EncryptUpdate(ctx, reinterpret_cast<unsigned char*>(out.data()), &n,
                        reinterpret_cast<const unsigned char*>(plaintext.data()),
                        static_cast<int>(plaintext.size())) &&
      (total = n, EVP_EncryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()) + n, &n)) &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTag, tag);
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) throw std::runtime_error("AES-256-GCM failed");
  out.resize(static_cast<size_t>(total + n));
  return std::string(kSealed) + ToHex(nonce, kNonce) +
         ToHex(reinterpret_cast<const unsigned char*>(out.data()), out.size()) + ToHex(tag, kTag);
}

Result<std::string> OpenSecret(std::string_view key_hex, std::string_view sealed) {
  if (!IsSealed(sealed)) return std::string(sealed);
  std::string key = FromHex(key_hex);
  std::string raw = FromHex(sealed.substr(kSealed.size()));
  if (key.size() != 32 || raw.size() < kNonce + kTag) {
    return MakeError(ErrorCode::kInternal, "a sealed secret is damaged");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  size_t len = raw.size() - kNonce - kTag;
  std::string out(len, '\0');
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0;
  unsigned char tag[kTag];
  std::copy(bytes + kNonce + len, bytes + raw.size(), tag);
  bool ok = ctx &&
            EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr,
                               reinterpret_cast<const unsigned char*>(key.data()), bytes) &&
            EVP_DecryptUpdate(ctx, reinterpret_cast<unsigned char*>(out.data()), &n, bytes + kNonce,
                              static_cast<int>(len)) &&
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTag, tag) &&
            EVP_DecryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()) + n, &n) > 0;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) {
    return MakeError(ErrorCode::kInternal,
                     "a sealed secret does not open with this secret.key (another controller's "
                     "key, or the secret was altered)");
  }
  return out;
}

}  // namespace gpufleet
