#include "apis/builtin_schemas.h"

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "apis/embedded_files.h"
#include "core/log.h"
#include "core/status.h"

namespace klutch::apis {

namespace {

// The embedded files are our own build inputs, so a defect in them is a programmer error:
// report it precisely, then abort.
[[noreturn]] void DataDefect(std::string_view file, std::string_view problem) {
  KLUTCH_LOG(kError, "apis", "embedded {}: {}", file, problem);
  core::CheckFailed("embedded schema data is well-formed", __FILE__, __LINE__);
}

machinery::Json LoadSchemas() {
  machinery::Json schemas = machinery::Json::object();
  for (const internal::EmbeddedFile& file : internal::BuiltinDataFiles()) {
    std::string text;
    for (std::string_view chunk : file.chunks) text.append(chunk);
    core::Result<machinery::Json> parsed = machinery::ParseYaml(text);
    if (!parsed.ok()) DataDefect(file.name, parsed.status().message());
    if (!parsed->is_object()) DataDefect(file.name, "top level is not a map of schemas");
    for (auto& [name, schema] : parsed->items()) {
      if (schemas.contains(name)) DataDefect(file.name, "duplicate definition " + name);
      schemas[name] = std::move(schema);
    }
  }
  return schemas;
}

std::string GvkKey(std::string_view group, std::string_view version, std::string_view kind) {
  std::string key;
  key.reserve(group.size() + version.size() + kind.size() + 2);
  key.append(group).append("/").append(version).append("/").append(kind);
  return key;
}

using GvkIndex = std::unordered_map<std::string, std::string>;

GvkIndex BuildGvkIndex(const machinery::Json& schemas) {
  GvkIndex index;
  for (const auto& [name, schema] : schemas.items()) {
    auto gvks = schema.find("x-kubernetes-group-version-kind");
    if (gvks == schema.end() || !gvks->is_array()) continue;
    for (const machinery::Json& gvk : *gvks) {
      std::string key =
          GvkKey(gvk.value("group", ""), gvk.value("version", ""), gvk.value("kind", ""));
      if (!index.emplace(key, name).second) DataDefect(name, "kind declared twice: " + key);
    }
  }
  return index;
}

constexpr std::string_view kAnnotationPrefix = "x-klutch-";

// Removes Klutch's annotations from a schema and every schema below it. Keys of `properties`
// are field names, never annotations.
void StripAnnotations(machinery::Json& node, bool field_names) {
  if (node.is_array()) {
    for (machinery::Json& element : node) StripAnnotations(element, false);
    return;
  }
  if (!node.is_object()) return;
  for (auto it = node.begin(); it != node.end();) {
    if (!field_names && std::string_view(it.key()).starts_with(kAnnotationPrefix)) {
      it = node.erase(it);
      continue;
    }
    StripAnnotations(it.value(), !field_names && it.key() == "properties");
    ++it;
  }
}

}  // namespace

const machinery::Json& AnnotatedBuiltinSchemas() {
  // Never destroyed, so users during static destruction stay safe.
  static const machinery::Json* const schemas = new machinery::Json(LoadSchemas());
  return *schemas;
}

const machinery::Json& BuiltinSchemas() {
  static const machinery::Json* const schemas = [] {
    auto* stripped = new machinery::Json(AnnotatedBuiltinSchemas());
    StripAnnotations(*stripped, /*field_names=*/true);
    return stripped;
  }();
  return *schemas;
}

std::string SchemaNameFor(std::string_view group, std::string_view version, std::string_view kind) {
  static const GvkIndex* const index = new GvkIndex(BuildGvkIndex(BuiltinSchemas()));
  auto it = index->find(GvkKey(group, version, kind));
  return it == index->end() ? std::string() : it->second;
}

}  // namespace klutch::apis
