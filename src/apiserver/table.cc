#include "apiserver/table.h"

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "machinery/jsonpath.h"

namespace klutch::apiserver {

bool WantsTable(std::string_view accept) {
  // Each media range: "application/json;as=Table;v=v1;g=meta.k8s.io".
  for (auto range : core::Split(accept, ',')) {
    bool table = false, group = false;
    for (auto param : core::Split(range, ';')) {
      param = core::Trim(param);
      if (param == "as=Table") table = true;
      if (param == "g=meta.k8s.io") group = true;
    }
    if (table && group) return true;
  }
  return false;
}

std::string TableApiVersion(std::string_view accept) {
  for (auto range : core::Split(accept, ',')) {
    bool table = false;
    std::string version = "v1";
    for (auto param : core::Split(range, ';')) {
      param = core::Trim(param);
      if (param == "as=Table") table = true;
      if (param.starts_with("v=")) version = std::string(param.substr(2));
    }
    if (table) return "meta.k8s.io/" + version;
  }
  return "meta.k8s.io/v1";
}

namespace {

Json Age(const Json& obj, core::SystemTime now) {
  const Json* ts = machinery::Find(obj, {"metadata", "creationTimestamp"});
  if (!ts || !ts->is_string()) return "<unknown>";
  auto t = core::ParseTime(ts->get<std::string>());
  if (!t) return "<unknown>";
  return core::HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *t));
}

// A printer-column cell from a JSONPath, formatted by the column type.
Json JsonPathCell(const Column& c, const Json& obj, core::SystemTime now) {
  auto compiled = machinery::JsonPath::Compile(c.json_path);
  if (!compiled.ok()) return "<error>";
  auto values = compiled->Evaluate(obj);
  if (values.empty()) return nullptr;
  const Json& v = *values.front();
  if (c.type == "date") {
    if (!v.is_string()) return v;
    auto t = core::ParseTime(v.get<std::string>());
    if (!t) return v;
    return core::HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *t));
  }
  if (c.type == "integer" && v.is_number()) return v.get<int64_t>();
  if (c.type == "string" && !v.is_string()) {
    return machinery::Dump(v);
  }
  return v;
}

Json PartialMetadata(const Json& obj, std::string_view api_version) {
  Json meta = obj.contains("metadata") ? obj["metadata"] : Json::object();
  return {{"kind", "PartialObjectMetadata"},
          {"apiVersion", std::string(api_version)},
          {"metadata", std::move(meta)}};
}

}  // namespace

Json ToTable(const ResourceInfo& r, const std::vector<const Json*>& objects, IncludeObject include,
             const Json& list_meta, bool column_definitions, core::SystemTime now,
             std::string_view api_version) {
  Json table = {
      {"kind", "Table"}, {"apiVersion", std::string(api_version)}, {"metadata", list_meta}};
  if (column_definitions) {
    Json defs = Json::array();
    for (const auto& c : r.columns) {
      defs.push_back({{"name", c.name},
                      {"type", c.type},
                      {"format", c.format},
                      {"description", c.description},
                      {"priority", c.priority}});
    }
    table["columnDefinitions"] = std::move(defs);
  } else {
    table["columnDefinitions"] = nullptr;
  }
  Json rows = Json::array();
  for (const Json* obj : objects) {
    Json cells = Json::array();
    for (const auto& c : r.columns) {
      // A malformed object must not take the listing (or a watch) down with it.
      try {
        if (c.cell) {
          cells.push_back(c.cell(*obj));
        } else if (!c.json_path.empty()) {
          cells.push_back(JsonPathCell(c, *obj, now));
        } else {
          cells.push_back(Age(*obj, now));
        }
      } catch (const std::exception&) {
        cells.push_back(nullptr);
      }
    }
    Json row = {{"cells", std::move(cells)}};
    if (include == IncludeObject::kMetadata) {
      row["object"] = PartialMetadata(*obj, api_version);
    } else if (include == IncludeObject::kObject) {
      row["object"] = *obj;
    }
    rows.push_back(std::move(row));
  }
  table["rows"] = std::move(rows);
  return table;
}

}  // namespace klutch::apiserver
