#pragma once
// JSON text with numbers as people write them: 0.8, 87.5, 3, 1e-07. Boost.JSON's own
// serialize writes doubles as 8E-1, 8.75E1 and 3E0; every JSON the API, the CLI and the store
// write goes through here instead. Strings are escaped as Boost.JSON escapes them; a double
// that is not finite is written as null.

#include <string>

namespace boost::json {
class value;
class object;
class array;
}  // namespace boost::json

namespace gpufleet {

std::string JsonText(const boost::json::value& v);
std::string JsonText(const boost::json::object& o);
std::string JsonText(const boost::json::array& a);

// The same with ", " and ": " between items: JSON that is also YAML's flow syntax, so a
// generated YAML file keeps strings strings and numbers numbers ({"a": 1, "b": ["x"]}).
void AppendYamlFlow(std::string& out, const boost::json::value& v);

}  // namespace gpufleet
