#pragma once
// Checks real responses against docs/openapi.yaml: the end-to-end tests pass every response
// they get through ControllerProcess::Call here, so the file cannot drift from what the
// controller sends. The operation is found by method and path (a literal segment beats a
// {parameter}); its status must be documented; a JSON body must match the schema. Schemas
// are OpenAPI 3.0's subset that the file uses: $ref, type, nullable, enum, properties (an
// object that lists properties has no others unless additionalProperties says so), required,
// additionalProperties, items, and format date-time.

#include <boost/json/value.hpp>
#include <string>
#include <vector>

namespace gpufleet::e2e {

// Every way the response differs from the file; empty when it matches. `target` may carry a
// query string.
std::vector<std::string> CheckResponse(const std::string& method, const std::string& target,
                                       int status, const boost::json::value* body);

// The same check of one value against a named schema of components/schemas (for unit tests of
// the checker).
std::vector<std::string> CheckSchema(const std::string& schema, const boost::json::value& value);

}  // namespace gpufleet::e2e
