// JSON and YAML decoding into the project's object model (nlohmann::json), with errors that
// name the problem the way kube-apiserver's decoders do.
//
// Objects are JSON end to end (docs/decisions/0002-object-representation.md). Thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

// nlohmann::json's member functions are compiled once, in json_instance.cc, instead of again in
// every translation unit that calls them (a sixth of a library source's compile time).
extern template class nlohmann::basic_json<>;

namespace klutch::machinery {

using Json = nlohmann::json;

// Objects and arrays may nest at most this deep in decoded documents.
inline constexpr size_t kMaxJsonDepth = 512;

// Parses one JSON document. Malformed input (including numbers out of range and nesting
// deeper than kMaxJsonDepth) -> BadRequest naming the offset and problem.
core::Result<Json> ParseJson(std::string_view text);

// Like ParseJson, and appends to `duplicates` the path of every object key that appears more
// than once in the same object ("metadata.name", "data.a"); the last value wins, as in Go.
core::Result<Json> ParseJsonReportingDuplicates(std::string_view text,
                                                std::vector<std::string>& duplicates);

// Parses one YAML document (or JSON, which is YAML) into JSON the way Kubernetes does:
// plain scalars resolve to null, bool, int, float or string; map keys must be strings.
// Malformed input or more than one document -> BadRequest naming the line.
core::Result<Json> ParseYaml(std::string_view text);

// Every document of a YAML stream ("---"-separated; JSON is one document), empty documents
// left out. Malformed input -> BadRequest naming the line.
core::Result<std::vector<Json>> ParseYamlDocuments(std::string_view text);

// Block-style YAML as kubectl prints it (-o yaml): keys in the object's order, lists under a
// key not indented, strings quoted only when they would otherwise read back as something
// else. ParseYaml(ToYaml(v)) == v for every v.
std::string ToYaml(const Json& value);

// Compact serialization (sorted keys, as Go's encoding of unstructured objects).
std::string Dump(const Json& value);

}  // namespace klutch::machinery
