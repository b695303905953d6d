#include "apiserver/rest_storage.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <set>

#include "apiserver/rest_storage_internal.h"
#include "core/strings.h"
#include "machinery/object.h"

// RestStorage's sources: reads and the shared helpers here; filter.cc (label and field
// selectors), rest_storage_list.cc, rest_storage_validation.cc (what create and update both
// check), rest_storage_create.cc, rest_storage_update.cc (updates, the status and finalize
// subresources), rest_storage_patch.cc, rest_storage_delete.cc.

namespace klutch::apiserver {

using machinery::GetString;

// ----------------------------------------------------------------------------------------
// Errors

core::Status NotFoundError(const ResourceInfo& r, std::string_view name) {
  core::Details d;
  d.name = std::string(name);
  d.group = r.group;
  d.kind = r.plural;
  return core::Status(core::Reason::kNotFound,
                      fmt::format("{} \"{}\" not found", r.GroupResource(), name), std::move(d));
}

core::Status AlreadyExistsError(const ResourceInfo& r, std::string_view name) {
  core::Details d;
  d.name = std::string(name);
  d.group = r.group;
  d.kind = r.plural;
  return core::Status(core::Reason::kAlreadyExists,
                      fmt::format("{} \"{}\" already exists", r.GroupResource(), name),
                      std::move(d));
}

core::Status ConflictError(const ResourceInfo& r, std::string_view name, std::string_view why) {
  core::Details d;
  d.name = std::string(name);
  d.group = r.group;
  d.kind = r.plural;
  return core::Status(
      core::Reason::kConflict,
      fmt::format("Operation cannot be fulfilled on {} \"{}\": {}", r.GroupResource(), name, why),
      std::move(d));
}

// ----------------------------------------------------------------------------------------
// Shared by the sources of RestStorage (rest_storage_internal.h)

namespace internal {

std::string Now(const core::Clock& clock) { return core::FormatTime(clock.Now()); }

std::function<std::string(int64_t, int64_t)> Stamp(std::shared_ptr<Json> object) {
  return [object](int64_t revision, int64_t) {
    machinery::MutableMetadata(*object)["resourceVersion"] = std::to_string(revision);
    return machinery::Dump(*object);
  };
}

core::Result<Json> Parse(const std::shared_ptr<const std::string>& raw) {
  auto r = machinery::ParseJson(*raw);
  if (!r.ok()) return core::Internal("stored object does not parse: " + r.status().message());
  return r;
}

void ToRequestedVersion(const ResourceInfo& r, Json& object) { r.ToServed(object); }

bool IsNamespaces(const ResourceInfo& r) { return r.group.empty() && r.plural == "namespaces"; }
bool IsResourceQuotas(const ResourceInfo& r) {
  return r.group.empty() && r.plural == "resourcequotas";
}

machinery::ManagerInfo Who(const ResourceInfo& r, const WriteOptions& options,
                           const core::Clock& clock, std::string operation) {
  machinery::ManagerInfo who;
  who.manager = options.field_manager;
  who.operation = std::move(operation);
  who.api_version = r.ApiVersion();
  who.subresource = options.subresource;
  who.time = Now(clock);
  return who;
}

}  // namespace internal

namespace {

// Go's unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
bool IsGoPrint(uint32_t cp) {
  if (cp < 0x80) return cp >= 0x20 && cp < 0x7F;
  static const re2::RE2 kGraphic(R"([\p{L}\p{M}\p{N}\p{P}\p{S}])");
  std::string rune;
  core::AppendUtf8(rune, cp);
  return re2::RE2::FullMatch(rune, kGraphic);
}

}  // namespace

std::string DefaultFieldManager(std::string_view user_agent) {
  // As kube-apiserver's prefixFromUserAgent: the part before the first '/', rune by rune
  // (an invalid byte is U+FFFD, as Go reads it), without unprintable runes, whole runes up
  // to 128 bytes. The result is valid UTF-8 whatever the header held.
  const std::string_view prefix = user_agent.substr(0, user_agent.find('/'));
  std::string out;
  for (size_t i = 0; i < prefix.size();) {
    const int32_t decoded = core::DecodeUtf8(prefix, i);
    const uint32_t cp = decoded < 0 ? 0xFFFD : static_cast<uint32_t>(decoded);
    if (!IsGoPrint(cp)) continue;
    std::string rune;
    core::AppendUtf8(rune, cp);
    if (out.size() + rune.size() > 128) break;
    out += rune;
  }
  return out;
}

core::Status CheckTypeMeta(const machinery::GroupVersionKind& want, Json& object) {
  if (!object.is_object()) return core::BadRequest("the body of the request must be a JSON object");
  const std::string want_api = want.group.empty() ? want.version : want.group + "/" + want.version;
  std::string api = GetString(object, {"apiVersion"});
  std::string kind = GetString(object, {"kind"});
  if (api.empty() && kind.empty()) {
    object["apiVersion"] = want_api;
    object["kind"] = want.kind;
    return core::Status::Ok();
  }
  if (kind.empty())
    return core::BadRequest("Object 'Kind' is missing in '" +
                            machinery::Dump(object).substr(0, 200) + "'");
  if (kind != want.kind) {
    return core::BadRequest(
        fmt::format("the kind of the object ({}) does not match the kind of the resource ({})",
                    kind, want.kind));
  }
  if (api != want_api) {
    return core::BadRequest(
        fmt::format("the API version in the data ({}) does not match the expected API version ({})",
                    api, want_api));
  }
  return core::Status::Ok();
}

// ----------------------------------------------------------------------------------------
// Reads

RestStorage::RestStorage(storage::Store& store, const Registry& registry, const core::Clock& clock)
    : store_(store), registry_(registry), clock_(clock) {}

core::Result<Json> RestStorage::Get(const ResourceInfo& r, std::string_view ns,
                                    std::string_view name) {
  KLUTCH_ASSIGN_OR_RETURN(auto kv, store_.Get(r.Key(ns, name)));
  if (!kv) return NotFoundError(r, name);
  KLUTCH_ASSIGN_OR_RETURN(Json obj, internal::Parse(kv->value));
  internal::ToRequestedVersion(r, obj);
  return obj;
}

core::Result<std::shared_ptr<const std::string>> RestStorage::GetRaw(const ResourceInfo& r,
                                                                     std::string_view ns,
                                                                     std::string_view name) {
  if (r.TransformsOnRead()) {
    KLUTCH_ASSIGN_OR_RETURN(Json obj, Get(r, ns, name));
    return std::make_shared<const std::string>(machinery::Dump(obj));
  }
  KLUTCH_ASSIGN_OR_RETURN(auto kv, store_.Get(r.Key(ns, name)));
  if (!kv) return NotFoundError(r, name);
  return kv->value;
}

void RestStorage::RecountQuotas() {
  ResourcePtr quotas = registry_.FindStored("", "resourcequotas");
  if (!quotas) return;
  auto list = List(*quotas, "", {});
  if (!list.ok()) return;
  std::set<std::string> namespaces;
  for (auto& item : list->items) namespaces.insert(machinery::Namespace(item.Object()));
  for (const auto& ns : namespaces) quotas_.QuotaWritten(ns);
}

}  // namespace klutch::apiserver
