#pragma once
// One table of a struct's fields for the places that write them all out and read them all
// back (a stored document, the API's form of it): each field is named once, beside its member,
// so that the writer and the reader cannot drift apart. Reading leaves a field that is absent,
// or not of its type, as it was (the struct's default): a stored document is the controller's
// own, and one written before a field existed reads as the default.
// Header-only, on Boost.JSON: include it only in .cpp files that build or read documents.

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <variant>

namespace gpufleet {

template <class T>
struct FieldOf {
  const char* name;
  std::variant<std::string T::*, int64_t T::*, int T::*, bool T::*> member;
};

namespace field_table {

inline void Read(const boost::json::value& j, std::string& out) {
  if (j.is_string()) out = std::string(j.as_string());
}
inline void Read(const boost::json::value& j, int64_t& out) {
  if (j.is_number()) out = j.to_number<int64_t>();
}
inline void Read(const boost::json::value& j, int& out) {
  if (j.is_number()) out = static_cast<int>(j.to_number<int64_t>());
}
inline void Read(const boost::json::value& j, bool& out) {
  if (j.is_bool()) out = j.as_bool();
}

}  // namespace field_table

// Each field of `table` from `v` into `o`, by its name.
template <class T, class Table>
void WriteFields(const T& v, const Table& table, boost::json::object& o) {
  for (const FieldOf<T>& f : table) {
    std::visit([&](auto member) { o[f.name] = v.*member; }, f.member);
  }
}

// Each field of `table` that `o` has into `v`.
template <class T, class Table>
void ReadFields(const boost::json::object& o, const Table& table, T& v) {
  for (const FieldOf<T>& f : table) {
    if (const boost::json::value* j = o.if_contains(f.name)) {
      std::visit([&](auto member) { field_table::Read(*j, v.*member); }, f.member);
    }
  }
}

}  // namespace gpufleet
