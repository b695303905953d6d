#include "kubectl_bind/status_table.h"

#include <algorithm>
#include <set>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::kubectl_bind {

using machinery::Json;

core::Result<std::string> BindingsTable(client::RestClient& app,
                                        const std::vector<std::string>& names) {
  client::Request request;
  request.path =
      client::ResourcePath(apis::klutch::kApiServiceBindings, apis::klutch::kBindNamespace);
  request.accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
  KLUTCH_ASSIGN_OR_RETURN(Json table, app.DoJson(request));
  std::vector<size_t> columns;
  std::vector<std::string> headers;
  const Json* defs = machinery::Find(table, {"columnDefinitions"});
  if (defs != nullptr && defs->is_array()) {
    for (size_t i = 0; i < defs->size(); ++i) {
      const Json& d = (*defs)[i];
      const Json* priority = machinery::Find(d, {"priority"});
      const int64_t* level = priority != nullptr ? priority->get_ptr<const int64_t*>() : nullptr;
      if (level != nullptr && *level != 0) {
        continue;
      }
      columns.push_back(i);
      headers.push_back(core::ToUpper(machinery::GetString(d, {"name"})));
    }
  }
  std::vector<std::vector<std::string>> rows = {headers};
  std::set<std::string> wanted(names.begin(), names.end());
  const Json* items = machinery::Find(table, {"rows"});
  if (items != nullptr && items->is_array()) {
    for (const Json& row : *items) {
      std::string name = machinery::GetString(row, {"object", "metadata", "name"});
      const Json* cells = machinery::Find(row, {"cells"});
      if (cells == nullptr || !cells->is_array()) continue;
      if (const std::string* first =
              cells->empty() ? nullptr : (*cells)[0].get_ptr<const std::string*>();
          name.empty() && first != nullptr) {
        name = *first;
      }
      if (!wanted.empty() && !wanted.count(name)) continue;
      std::vector<std::string> line;
      for (size_t i : columns) {
        const Json& cell = i < cells->size() ? (*cells)[i] : Json();
        const std::string* text = cell.get_ptr<const std::string*>();
        line.push_back(text != nullptr ? *text : cell.is_null() ? "<none>" : machinery::Dump(cell));
      }
      rows.push_back(std::move(line));
    }
  }
  std::vector<size_t> widths(headers.size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace klutch::kubectl_bind
