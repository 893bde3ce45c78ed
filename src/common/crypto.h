#pragma once
// Secrets: random tokens and their SHA-256 digests (tokens are stored hashed, never in clear),
// and the secrets the controller must keep in a usable form (webhook signing keys), sealed
// with AES-256-GCM under the data directory's secret.key.

#include <string>
#include <string_view>

#include "common/result.h"

namespace gpufleet {

std::string RandomHex(size_t bytes);                                     // from OpenSSL's CSPRNG
std::string Base64Encode(std::string_view data);                         // RFC 4648, padded
std::string Sha256Hex(std::string_view data);                            // lower-case hex
std::string HmacSha256Hex(std::string_view key, std::string_view data);  // lower-case hex
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// The 32-byte key in `path` (64 hex digits), made (mode 0600) when the file does not exist.
// A file that is not such a key is an error, never replaced.
Result<std::string> LoadOrCreateKey(const std::string& path);

// "enc:v1:" and hex of a random 12-byte nonce, the ciphertext and the 16-byte tag.
std::string SealSecret(std::string_view key, std::string_view plaintext);
// The plaintext of SealSecret's output; an error when it was sealed under another key or
// altered. Text without the "enc:v1:" prefix (written before secrets were sealed) is returned
// as it is.
Result<std::string> OpenSecret(std::string_view key, std::string_view sealed);
bool IsSealed(std::string_view text);

}  // namespace gpufleet
