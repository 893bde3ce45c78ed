#pragma once
// Secrets: random tokens and their SHA-256 digests (tokens are stored hashed, never in clear).

#include <string>
#include <string_view>

namespace gpufleet {

std::string RandomHex(size_t bytes);                                     // from OpenSSL's CSPRNG
std::string Sha256Hex(std::string_view data);                            // lower-case hex
std::string HmacSha256Hex(std::string_view key, std::string_view data);  // lower-case hex
bool ConstantTimeEqual(std::string_view a, std::string_view b);

}  // namespace gpufleet
