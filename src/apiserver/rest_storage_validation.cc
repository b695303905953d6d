#include <fmt/format.h>

#include "apis/builtin_schemas.h"
#include "apiserver/rest_storage.h"
#include "apiserver/rest_storage_internal.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "machinery/validation.h"
#include "schema/structural.h"
#include "schema/validation_rules.h"

// What create and update both check before they write: field validation, types, metadata,
// schema and CEL rules, the kind's strategy, admission; and the namespace of a new object.

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

core::Status RestStorage::ValidateObject(const ResourceInfo& r, Json& object, const Json* old,
                                         const WriteOptions& options,
                                         std::vector<std::string>& warnings) {
  // Unknown fields: pruned always (as decoding drops them); reported per fieldValidation.
  machinery::SchemaCursor schema = r.Schema();
  if (schema.known()) {
    static const machinery::SchemaCursor kObjectMeta = [] {
      const Json& schemas = apis::BuiltinSchemas();
      auto it = schemas.find("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
      return it == schemas.end() ? machinery::SchemaCursor()
                                 : machinery::SchemaCursor(&*it, &schemas);
    }();
    std::vector<std::string> pruned;
    schema::PruneUnknownFields(object, schema, kObjectMeta, pruned);
    std::vector<std::string> problems;
    for (const auto& p : pruned) problems.push_back(fmt::format("unknown field \"{}\"", p));
    for (const auto& d : options.duplicate_fields) {
      problems.push_back(fmt::format("duplicate field \"{}\"", d));
    }
    if (!problems.empty()) {
      if (options.field_validation == FieldValidation::kStrict) {
        return core::BadRequest(
            fmt::format("{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                        r.kind, r.ApiVersion(), r.kind, core::Join(problems, ", ")));
      }
      if (options.field_validation == FieldValidation::kWarn) {
        warnings.insert(warnings.end(), problems.begin(), problems.end());
      }
    }
  }
  // Built-in kinds are decoded into typed structs by kube-apiserver: a value of the wrong
  // type is a decoding error (400), before any validation.
  if (schema.known() && !r.custom) {
    std::vector<core::Cause> type_errors;
    schema::ValidateTypes(object, schema, type_errors);
    if (!type_errors.empty()) {
      std::vector<std::string> parts;
      for (const auto& c : type_errors) parts.push_back(c.field + ": " + c.message);
      return core::BadRequest(fmt::format("{} in version \"{}\" cannot be handled as a {}: {}",
                                          r.kind, r.ApiVersion(), r.kind, core::Join(parts, ", ")));
    }
  }
  // Metadata first, then the kind's own rules: the order kube-apiserver reports causes in.
  std::vector<core::Cause> causes;
  const Json* meta = Find(object, {"metadata"});
  machinery::ValidateObjectMeta(meta ? *meta : Json::object(), r.namespaced, r.name_rule, causes);
  if (schema.known()) {
    // Built-in schemas carry only the defaults kube-apiserver applies (e.g. a Deployment's
    // replicas); custom resources get theirs from the CRD. Structural validation is for
    // custom resources: built-in kinds are checked by their strategies.
    schema::ApplyDefaults(object, schema);
    if (r.custom) schema::Validate(object, schema, causes);
  }
  // x-kubernetes-validations, skipped (with a note) when the schema errors already found
  // would make rules misread the object, as kube-apiserver does.
  if (r.rules && !r.rules->empty()) {
    if (schema::HasBlockingError(causes)) {
      causes.push_back(schema::RulesNotCheckedCause());
    } else {
      r.rules->Validate(object, old, causes, &warnings);
    }
  }
  if (old == nullptr) {
    if (r.strategy.prepare_create) r.strategy.prepare_create(object, causes);
  } else {
    if (r.strategy.prepare_update) r.strategy.prepare_update(object, *old, causes);
  }
  if (old != nullptr && machinery::IsBeingDeleted(*old)) {
    std::vector<std::string> added;
    auto before = machinery::Finalizers(*old);
    for (const auto& f : machinery::Finalizers(object)) {
      if (std::find(before.begin(), before.end(), f) == before.end()) added.push_back(f);
    }
    if (!added.empty()) {
      std::string list;
      for (const auto& a : added) list += (list.empty() ? "" : ", ") + machinery::Dump(Json(a));
      causes.push_back(machinery::FieldForbidden(
          "metadata.finalizers",
          fmt::format("no new finalizers can be added if the object is being deleted, found new "
                      "finalizers []string{{{}}}",
                      list)));
    }
  }
  if (!causes.empty())
    return machinery::InvalidObject(r.group, r.kind, machinery::Name(object), causes);
  if (options.admit) return options.admit(object, old);
  return core::Status::Ok();
}

core::Status RestStorage::CheckNamespaceForCreate(const ResourceInfo& r, std::string_view ns,
                                                  std::string_view name) {
  if (!r.namespaced) return core::Status::Ok();
  auto kv = store_.Get("/registry/core/namespaces/" + std::string(ns));
  if (!kv.ok()) return kv.status();
  if (!kv->has_value()) {
    core::Details d;
    d.name = std::string(ns);
    d.kind = "namespaces";
    return core::Status(core::Reason::kNotFound, fmt::format("namespaces \"{}\" not found", ns),
                        std::move(d));
  }
  auto obj = machinery::ParseJson(*(*kv)->value);
  if (obj.ok() && machinery::IsBeingDeleted(*obj)) {
    std::string why = fmt::format(
        "unable to create new content in namespace {} because it is being terminated", ns);
    core::Details d;
    d.name = std::string(name);
    d.group = r.group;
    d.kind = r.plural;
    d.causes.push_back({"NamespaceTerminating", why, "metadata.namespace"});
    return core::Status(core::Reason::kForbidden,
                        fmt::format("{} \"{}\" is forbidden: {}", r.GroupResource(), name, why),
                        std::move(d));
  }
  return core::Status::Ok();
}

}  // namespace klutch::apiserver
