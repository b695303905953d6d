#include "client/apply.h"

#include <fmt/format.h>

#include "client/dynamic.h"
#include "machinery/object.h"

namespace klutch::client {
namespace {

constexpr char kCreateOnlyAnnotation[] = "bootstrap.klutch.anynines.com/create-only";

std::string Describe(const machinery::Json& object) {
  std::string ns = machinery::Namespace(object);
  return fmt::format("{} {}{}", machinery::Kind(object), ns.empty() ? "" : ns + "/",
                     machinery::Name(object));
}

}  // namespace

core::Result<machinery::Json> Applier::Apply(const machinery::Json& object,
                                             const ApplyOptions& options) {
  if (!object.is_object() || machinery::ApiVersionOf(object).empty() ||
      machinery::Kind(object).empty() || machinery::Name(object).empty()) {
    return core::BadRequest("an object to apply needs apiVersion, kind and metadata.name");
  }
  machinery::GroupVersion gv = machinery::ParseApiVersion(machinery::ApiVersionOf(object));
  auto mapping = mapper_.ForKind(gv.group, machinery::Kind(object), gv.version);
  if (!mapping.ok()) {
    return core::Status(mapping.status().reason(),
                        fmt::format("{}: {}", Describe(object), mapping.status().message()));
  }
  std::string ns = machinery::Namespace(object);
  if (mapping->namespaced && ns.empty()) {
    return core::BadRequest(Describe(object) + ": a namespaced kind needs metadata.namespace");
  }
  ResourceClient resource(rest_, mapping->gvr, mapping->namespaced ? ns : "");
  std::string name = machinery::Name(object);
  auto live = resource.Get(name);
  if (live.ok() && !machinery::Annotation(*live, kCreateOnlyAnnotation).empty()) return *live;
  WriteOptions write{
      .field_manager = options.field_manager, .dry_run = options.dry_run, .force = true};
  auto applied = resource.Patch(name, PatchType::kApply, machinery::Dump(object), write);
  if (!applied.ok()) {
    return core::Status(applied.status().reason(), fmt::format("applying {}: {}", Describe(object),
                                                               applied.status().message()));
  }
  return applied;
}

core::Status Applier::ApplyYaml(std::string_view yaml, const std::string& source,
                                const ApplyOptions& options) {
  auto docs = machinery::ParseYamlDocuments(yaml);
  if (!docs.ok()) return core::BadRequest(source + ": " + docs.status().message());
  for (const machinery::Json& object : *docs) {
    auto applied = Apply(object, options);
    if (!applied.ok()) {
      return core::Status(applied.status().reason(), source + ": " + applied.status().message());
    }
  }
  return core::Status::Ok();
}

}  // namespace klutch::client
