#include "apiserver/table.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

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

// A float as Go's fmt prints it with %v (strconv's shortest 'g': exponent form below 1e-4
// and from 1e6 on, at least two exponent digits).
std::string GoFloat(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(sci.ptr - buf));
  const size_t e = s.find('e');
  const int exp = std::atoi(std::string(s.substr(e + 1)).c_str());
  if (exp < -4 || exp >= 6) {
    std::string mantissa(s.substr(0, e));
    const char sign = exp < 0 ? '-' : '+';
    const int a = exp < 0 ? -exp : exp;
    return fmt::format("{}e{}{:02d}", mantissa, sign, a);
  }
  auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, fixed.ptr);
}

// A printer-column cell as kube-apiserver's CRD table convertor computes it: the first value
// the path selects (null when none); string columns print any value (JSON for objects and
// arrays), other types keep only values of their type.
Json JsonPathCell(const Column& c, const machinery::JsonPath& path, const Json& obj,
                  core::SystemTime now) {
  auto values = path.Evaluate(obj);
  if (values.empty()) return nullptr;
  const Json& v = *values.front();
  if (c.type == "string") {
    if (v.is_string()) return v;
    if (v.is_null()) return "<no value>";  // what Go's template printer shows for nil
    if (v.is_number_float()) return GoFloat(v.get<double>());
    return machinery::Dump(v);
  }
  if (v.is_null()) return nullptr;
  if (c.type == "integer") {
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)) return nullptr;
      return static_cast<int64_t>(d);  // Go's int64(float64) truncates
    }
    return v.is_number() ? v : Json();
  }
  if (c.type == "number") return v.is_number() ? v : Json();
  if (c.type == "boolean") return v.is_boolean() ? v : Json();
  if (c.type == "date") {
    if (!v.is_string()) return nullptr;
    auto t = core::ParseTime(v.get<std::string>());
    if (!t) return "<invalid>";
    return core::HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *t));
  }
  return nullptr;
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
  // Each printer column's path, parsed once per table as kube-apiserver parses it.
  std::vector<std::optional<machinery::JsonPath>> paths;
  paths.reserve(r.columns.size());
  for (const auto& c : r.columns) {
    std::optional<machinery::JsonPath> path;
    if (!c.cell && !c.json_path.empty()) {
      if (auto p = machinery::JsonPath::Compile("{" + c.json_path + "}"); p.ok()) path = *p;
    }
    paths.push_back(std::move(path));
  }
  Json rows = Json::array();
  for (const Json* obj : objects) {
    Json cells = Json::array();
    for (size_t i = 0; i < r.columns.size(); ++i) {
      const Column& c = r.columns[i];
      // A malformed object must not take the listing (or a watch) down with it.
      try {
        if (c.cell) {
          cells.push_back(c.cell(*obj));
        } else if (!c.json_path.empty()) {
          cells.push_back(paths[i] ? JsonPathCell(c, *paths[i], *obj, now) : Json());
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
