// The fixed shapes of a bulletin's identifiers, shared by the YAML file's reader and the CSAF
// import (bulletins.cpp, csaf.cpp). Private to src/model.
#pragma once

#include <algorithm>
#include <string_view>

namespace gpufleet::bulletin_ids {

// Fixed shapes are checked by hand: no regular expression runs over a document's text.
inline bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline bool IsDate(std::string_view s) {  // YYYY-MM-DD
  return s.size() == 10 && s[4] == '-' && s[7] == '-' && AllDigits(s.substr(0, 4)) &&
         AllDigits(s.substr(5, 2)) && AllDigits(s.substr(8, 2));
}

// CVE-YYYY-NNNN..., the sequence number of 4 to 19 digits (MITRE's are at most 7 today).
inline bool IsCveId(std::string_view s) {
  if (s.size() < 13 || s.size() > 28 || s.substr(0, 4) != "CVE-" || s[8] != '-') return false;
  return AllDigits(s.substr(4, 4)) && AllDigits(s.substr(9));
}

// A bulletin's id (a CSAF tracking.id, NVIDIA's "5614"-style numbers): it becomes a key and a
// part of URLs, so letters, digits, '.', '_' and '-' only, at most 64 of them.
inline bool IsBulletinId(std::string_view s) {
  return !s.empty() && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(),
                     [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
                     }) &&
         s != "." && s != "..";
}

}  // namespace gpufleet::bulletin_ids
