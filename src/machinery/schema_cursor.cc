#include "machinery/schema_cursor.h"

#include <nlohmann/json.hpp>

namespace klutch::machinery {

namespace {
constexpr std::string_view kRefPrefix = "#/components/schemas/";
constexpr std::string_view kRefPrefixV2 = "#/definitions/";
}  // namespace

SchemaCursor::SchemaCursor(const Json* schema, const Json* schemas)
    : outer_(schema), node_(Resolve(schema, schemas)), schemas_(schemas) {}

const Json* SchemaCursor::Resolve(const Json* node, const Json* schemas) {
  // Bounded: a self-referencing $ref chain must not loop forever.
  for (int depth = 0; node != nullptr && depth < 32; ++depth) {
    if (!node->is_object()) return nullptr;
    auto ref = node->find("$ref");
    if (ref == node->end()) {
      auto all = node->find("allOf");
      // Kubernetes wraps references as {"allOf":[{"$ref":...}], "description":...}.
      if (all != node->end() && all->is_array() && all->size() == 1 &&
          node->find("properties") == node->end() && node->find("type") == node->end()) {
        node = &(*all)[0];
        continue;
      }
      return node;
    }
    if (!ref->is_string() || schemas == nullptr || !schemas->is_object()) return nullptr;
    std::string_view target = ref->get_ref<const std::string&>();
    if (target.starts_with(kRefPrefix)) {
      target.remove_prefix(kRefPrefix.size());
    } else if (target.starts_with(kRefPrefixV2)) {
      target.remove_prefix(kRefPrefixV2.size());
    } else {
      return nullptr;
    }
    auto it = schemas->find(std::string(target));
    if (it == schemas->end()) return nullptr;
    node = &*it;
  }
  return nullptr;
}

SchemaCursor SchemaCursor::Field(std::string_view name) const {
  if (node_ == nullptr) return {};
  auto props = node_->find("properties");
  if (props != node_->end() && props->is_object()) {
    auto it = props->find(std::string(name));
    if (it != props->end()) return SchemaCursor(&*it, schemas_);
  }
  return Values();
}

SchemaCursor SchemaCursor::Items() const {
  if (node_ == nullptr) return {};
  auto it = node_->find("items");
  if (it == node_->end()) return {};
  return SchemaCursor(&*it, schemas_);
}

SchemaCursor SchemaCursor::Values() const {
  if (node_ == nullptr) return {};
  auto it = node_->find("additionalProperties");
  if (it == node_->end() || !it->is_object()) return {};
  return SchemaCursor(&*it, schemas_);
}

std::string SchemaCursor::Extension(std::string_view key) const {
  if (node_ == nullptr) return "";
  for (const Json* n : {outer_, node_}) {
    if (n == nullptr || !n->is_object()) continue;
    auto it = n->find(std::string(key));
    if (it != n->end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

std::vector<std::string> SchemaCursor::ListMapKeys() const {
  std::vector<std::string> keys;
  if (node_ == nullptr) return keys;
  for (const Json* n : {outer_, node_}) {
    if (n == nullptr || !n->is_object()) continue;
    auto it = n->find("x-kubernetes-list-map-keys");
    if (it == n->end() || !it->is_array()) continue;
    for (const auto& k : *it) {
      if (k.is_string()) keys.push_back(k.get<std::string>());
    }
    return keys;
  }
  return keys;
}

bool SchemaCursor::PreservesUnknownFields() const {
  if (node_ == nullptr) return false;
  auto it = node_->find("x-kubernetes-preserve-unknown-fields");
  return it != node_->end() && it->is_boolean() && it->get<bool>();
}

}  // namespace klutch::machinery
