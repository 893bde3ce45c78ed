#pragma once
// Small string helpers shared by every component.

#include <string>
#include <string_view>
#include <vector>

namespace gpufleet {

std::vector<std::string> Split(std::string_view text, char sep);
// The parts with `sep` between them.
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
std::string ToLower(std::string_view text);
bool IsValidName(std::string_view name);  // DNS-label style: [a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 63
std::string FormatBytes(uint64_t bytes);  // "80.0 GiB"

// Text from outside (a hostname, a token's name, an address) made safe for a log line, an error
// message or a terminal: control characters and DEL written as \n, \r, \t or \xNN, and
// anything past `max` bytes cut off with "...". A log line cannot be forged through it.
std::string Printable(std::string_view text, size_t max = 200);
// True when `text` has a control character (below 0x20, or DEL).
bool HasControl(std::string_view text);

// A JSON string literal of `s`, escaped, appended to `out`.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace gpufleet
