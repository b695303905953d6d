#include "apiserver/rest_storage.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "apis/builtin_schemas.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/json_patch.h"
#include "machinery/managed_fields.h"
#include "machinery/merge_patch.h"
#include "machinery/selector.h"
#include "machinery/strategic_merge_patch.h"
#include "machinery/validation.h"
#include "schema/structural.h"
#include "schema/validation_rules.h"

namespace klutch::apiserver {

using machinery::Find;
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

namespace {

constexpr std::string_view kModified =
    "the object has been modified; please apply your changes to the latest version and try "
    "again";
constexpr int kMaxUpdateAttempts = 32;

core::Status BadRequest(std::string message) { return core::BadRequest(std::move(message)); }

std::string Now(const core::Clock& clock) { return core::FormatTime(clock.Now()); }

// The stored form of an object: resourceVersion stamped at commit time.
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

// Copies `r`'s apiVersion onto an object read from storage (CRDs with several versions and
// conversion None).
void ToRequestedVersion(const ResourceInfo& r, Json& object) { r.ToServed(object); }

Json WithoutVolatile(const Json& object) {
  Json copy = object;
  if (copy.is_object() && copy.contains("metadata") && copy["metadata"].is_object()) {
    copy["metadata"].erase("managedFields");
    copy["metadata"].erase("resourceVersion");
  }
  return copy;
}

// Everything but metadata (and status, when it is a subresource): what metadata.generation
// counts changes of.
Json SpecPart(const Json& object, bool status_is_subresource) {
  Json copy = object;
  if (copy.is_object()) {
    copy.erase("metadata");
    if (status_is_subresource) copy.erase("status");
    copy.erase("apiVersion");
    copy.erase("kind");
  }
  return copy;
}

// Whether two managedFields lists record the same ownership (timestamps aside), so that an
// apply that changes nothing writes nothing.
bool SameOwnership(const Json* a, const Json* b) {
  auto strip = [](const Json* mf) {
    Json out = mf && mf->is_array() ? *mf : Json::array();
    for (auto& e : out) {
      if (e.is_object()) e.erase("time");
    }
    return out;
  };
  return strip(a) == strip(b);
}

bool IsNamespaces(const ResourceInfo& r) { return r.group.empty() && r.plural == "namespaces"; }
bool IsResourceQuotas(const ResourceInfo& r) {
  return r.group.empty() && r.plural == "resourcequotas";
}

// Whether a deleted object may now disappear: no finalizers left (and, for namespaces, no
// spec.finalizers).
bool ReadyToRemove(const ResourceInfo& r, const Json& object) {
  if (!machinery::IsBeingDeleted(object)) return false;
  if (!machinery::Finalizers(object).empty()) return false;
  if (IsNamespaces(r)) {
    const Json* f = Find(object, {"spec", "finalizers"});
    if (f && f->is_array() && !f->empty()) return false;
  }
  return true;
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

// Fields kube-apiserver does not let clients set, reset from the current object (or cleared
// on create).
void CopyServerOwnedMetadata(const Json& current, Json& updated) {
  Json& m = machinery::MutableMetadata(updated);
  const Json* cm = Find(current, {"metadata"});
  for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation"}) {
    const Json* v = cm ? Find(*cm, {k}) : nullptr;
    if (v) {
      m[k] = *v;
    } else {
      m.erase(k);
    }
  }
  m.erase("selfLink");
}

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

// ----------------------------------------------------------------------------------------
// Filters

struct Filter::Impl {
  machinery::LabelSelector labels;
  machinery::FieldSelector fields;
};

core::Result<Filter> Filter::Make(const ResourceInfo& r, const std::string& labels,
                                  const std::string& fields) {
  Filter f;
  auto impl = std::make_shared<Impl>();
  auto ls = machinery::LabelSelector::Parse(labels);
  if (!ls.ok()) return BadRequest(ls.status().message());
  impl->labels = std::move(ls).value();
  auto fs = machinery::FieldSelector::Parse(fields);
  if (!fs.ok()) return BadRequest(fs.status().message());
  impl->fields = std::move(fs).value();
  for (const auto& req : impl->fields.requirements()) {
    bool known = req.field == "metadata.name" || req.field == "metadata.namespace";
    if (!known && r.strategy.fields)
      known = r.strategy.fields(Json::object(), req.field).has_value();
    if (!known) {
      return BadRequest(fmt::format("field label not supported: {}", req.field));
    }
  }
  f.impl_ = std::move(impl);
  return f;
}

bool Filter::Empty() const { return !impl_ || (impl_->labels.Empty() && impl_->fields.Empty()); }

bool Filter::KeyOnly() const {
  if (!impl_) return true;
  if (!impl_->labels.Empty()) return false;
  for (const auto& req : impl_->fields.requirements()) {
    if (!req.equal || (req.field != "metadata.name" && req.field != "metadata.namespace")) {
      return false;
    }
  }
  return true;
}

bool Filter::Matches(const ResourceInfo& r, const Json& object) const {
  if (!impl_) return true;
  if (!impl_->labels.Empty()) {
    const Json* labels = Find(object, {"metadata", "labels"});
    if (!impl_->labels.Matches(labels ? *labels : Json())) return false;
  }
  if (!impl_->fields.Empty()) {
    return impl_->fields.Matches([&](std::string_view field) -> std::optional<std::string> {
      if (field == "metadata.name") return machinery::Name(object);
      if (field == "metadata.namespace") return machinery::Namespace(object);
      if (r.strategy.fields) return r.strategy.fields(object, field);
      return std::nullopt;
    });
  }
  return true;
}

std::string Filter::PinnedName() const {
  if (!impl_) return "";
  for (const auto& req : impl_->fields.requirements()) {
    if (req.field == "metadata.name" && req.equal) return req.value;
  }
  return "";
}

std::string Filter::PinnedNamespace() const {
  if (!impl_) return "";
  for (const auto& req : impl_->fields.requirements()) {
    if (req.field == "metadata.namespace" && req.equal) return req.value;
  }
  return "";
}

const Json& ListItem::Object() {
  if (!parsed) {
    auto r = machinery::ParseJson(*raw);
    parsed = std::make_shared<const Json>(r.ok() ? std::move(r).value() : Json::object());
  }
  return *parsed;
}

// ----------------------------------------------------------------------------------------
// Reads

RestStorage::RestStorage(storage::Store& store, const Registry& registry, const core::Clock& clock)
    : store_(store), registry_(registry), clock_(clock) {}

core::Result<Json> RestStorage::Get(const ResourceInfo& r, std::string_view ns,
                                    std::string_view name) {
  KLUTCH_ASSIGN_OR_RETURN(auto kv, store_.Get(r.Key(ns, name)));
  if (!kv) return NotFoundError(r, name);
  KLUTCH_ASSIGN_OR_RETURN(Json obj, Parse(kv->value));
  ToRequestedVersion(r, obj);
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

std::string RestStorage::EncodeContinue(int64_t revision, std::string_view start) {
  Json token = {{"v", "meta.k8s.io/v1"}, {"rv", revision}, {"start", std::string(start)}};
  return core::Base64UrlEncode(token.dump());
}

namespace {

constexpr const char* kContinueTooOld =
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list.";

struct ContinueToken {
  int64_t revision = 0;
  std::string start;
};

core::Result<ContinueToken> DecodeContinue(std::string_view token) {
  auto bytes = core::Base64UrlDecode(token);
  if (!bytes) bytes = core::Base64Decode(token);
  if (!bytes) return BadRequest("continue key is not valid: illegal base64 data");
  auto j = machinery::ParseJson(*bytes);
  if (!j.ok() || !j->is_object()) return BadRequest("continue key is not valid: not JSON");
  const Json* rv = Find(*j, {"rv"});
  const Json* start = Find(*j, {"start"});
  if (GetString(*j, {"v"}) != "meta.k8s.io/v1" || !rv || !rv->is_number_integer() || !start ||
      !start->is_string()) {
    return BadRequest("continue key is not valid: incorrect encoded start resourceVersion");
  }
  ContinueToken out{rv->get<int64_t>(), start->get<std::string>()};
  if (out.revision <= 0 || out.start.find("..") != std::string::npos) {
    return BadRequest("continue key is not valid: incorrect encoded start resourceVersion");
  }
  return out;
}

core::Status InvalidListOption(std::string field, const Json& value, std::string detail) {
  std::vector<core::Cause> causes{machinery::FieldInvalid(field, value, detail)};
  return core::Status(
      core::Reason::kInvalid,
      fmt::format("{}: Invalid value: {}: {}", field, machinery::Dump(value), detail),
      core::Details{.causes = causes});
}

}  // namespace

core::Result<ListOutcome> RestStorage::List(const ResourceInfo& r, std::string_view ns,
                                            const ListOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(Filter filter,
                          Filter::Make(r, options.label_selector, options.field_selector));
  std::string prefix = r.KeyPrefix();
  if (r.namespaced && !ns.empty()) prefix += std::string(ns) + "/";

  int64_t revision = 0;
  std::string start_after;
  const std::string& rv = options.resource_version;
  const std::string& match = options.resource_version_match;
  if (!match.empty()) {
    if (match != "Exact" && match != "NotOlderThan") {
      return InvalidListOption("resourceVersionMatch", match, "must be one of Exact, NotOlderThan");
    }
    if (rv.empty()) {
      return InvalidListOption(
          "resourceVersionMatch", match,
          "resourceVersionMatch is forbidden unless resourceVersion is provided");
    }
    if (!options.continue_token.empty()) {
      return InvalidListOption("resourceVersionMatch", match,
                               "resourceVersionMatch is forbidden when continue is provided");
    }
    if (match == "Exact" && rv == "0") {
      return InvalidListOption(
          "resourceVersionMatch", match,
          "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
    }
  }
  std::optional<int64_t> rv_number;
  if (!rv.empty()) {
    rv_number = core::ParseInt64(rv);
    if (!rv_number || *rv_number < 0) {
      return BadRequest(fmt::format("Invalid value: \"{}\": must be a number", rv));
    }
  }
  if (!options.continue_token.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(ContinueToken token, DecodeContinue(options.continue_token));
    revision = token.revision;
    start_after = prefix + token.start;
    if (revision < store_.CompactedRevision()) {
      return core::Status(core::Reason::kExpired, kContinueTooOld);
    }
  } else if (match == "Exact") {
    revision = *rv_number;
  } else if (rv_number && *rv_number > 0) {
    // NotOlderThan: wait a little for the store to catch up, then fail as kube does.
    if (!store_.WaitForRevision(*rv_number, std::chrono::seconds(3))) {
      core::Status s(core::Reason::kTimeout,
                     fmt::format("Too large resource version: {}, current: {}", *rv_number,
                                 store_.Revision()));
      s.mutable_details().causes.push_back(
          {"ResourceVersionTooLarge", "Too large resource version", ""});
      s.mutable_details().retry_after_seconds = 1;
      return s;
    }
  }

  // A field selector on metadata.name narrows the scan to one key per namespace.
  ListOutcome out;
  const bool needs_parse = !filter.Empty() || r.TransformsOnRead();
  const int64_t limit = options.limit > 0 ? options.limit : 0;
  std::string last_key;
  bool more = false;
  int64_t snapshot = revision;
  while (true) {
    storage::ListRequest req;
    req.prefix = prefix;
    req.start_after = start_after;
    req.revision = snapshot;
    req.limit =
        limit > 0 ? std::max<int64_t>(limit - static_cast<int64_t>(out.items.size()), 1) : 0;
    if (limit > 0 && !filter.Empty()) req.limit = std::max<int64_t>(req.limit, 64);
    auto page = store_.List(req);
    if (!page.ok()) {
      if (core::IsGone(page.status()) && !options.continue_token.empty()) {
        return core::Status(core::Reason::kExpired, kContinueTooOld);
      }
      return page.status();
    }
    snapshot = page->revision;
    size_t consumed = 0;
    bool full = false;
    for (auto& kv : page->items) {
      ++consumed;
      ListItem item{kv.value, nullptr};
      if (needs_parse) {
        const Json& obj = item.Object();
        if (!filter.Matches(r, obj)) {
          last_key = kv.key;
          if (limit > 0 && static_cast<int64_t>(out.items.size()) == limit) break;
          continue;
        }
        if (r.TransformsOnRead()) {
          Json copy = obj;
          ToRequestedVersion(r, copy);
          item.parsed = std::make_shared<const Json>(std::move(copy));
          item.raw = std::make_shared<const std::string>(machinery::Dump(*item.parsed));
        }
      }
      out.items.push_back(std::move(item));
      last_key = kv.key;
      if (limit > 0 && static_cast<int64_t>(out.items.size()) == limit) {
        full = true;
        break;
      }
    }
    if (full) {
      more = consumed < page->items.size() || page->more;
      break;
    }
    if (!page->more) break;
    start_after = last_key;
  }
  out.resource_version = std::to_string(snapshot);
  if (more) out.continue_token = EncodeContinue(snapshot, last_key.substr(prefix.size()));
  return out;
}

// ----------------------------------------------------------------------------------------
// Validation shared by create and update

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
        return BadRequest(
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
      return BadRequest(fmt::format("{} in version \"{}\" cannot be handled as a {}: {}", r.kind,
                                    r.ApiVersion(), r.kind, core::Join(parts, ", ")));
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

// ----------------------------------------------------------------------------------------
// Create

namespace {}  // namespace

core::Status CheckTypeMeta(const machinery::GroupVersionKind& want, Json& object) {
  if (!object.is_object()) return BadRequest("the body of the request must be a JSON object");
  const std::string want_api = want.group.empty() ? want.version : want.group + "/" + want.version;
  std::string api = GetString(object, {"apiVersion"});
  std::string kind = GetString(object, {"kind"});
  if (api.empty() && kind.empty()) {
    object["apiVersion"] = want_api;
    object["kind"] = want.kind;
    return core::Status::Ok();
  }
  if (kind.empty())
    return BadRequest("Object 'Kind' is missing in '" + machinery::Dump(object).substr(0, 200) +
                      "'");
  if (kind != want.kind) {
    return BadRequest(
        fmt::format("the kind of the object ({}) does not match the kind of the resource ({})",
                    kind, want.kind));
  }
  if (api != want_api) {
    return BadRequest(
        fmt::format("the API version in the data ({}) does not match the expected API version ({})",
                    api, want_api));
  }
  return core::Status::Ok();
}

namespace {

core::Status CheckNamespace(const ResourceInfo& r, std::string_view ns, Json& object) {
  Json& m = machinery::MutableMetadata(object);
  if (!r.namespaced) {
    m.erase("namespace");
    return core::Status::Ok();
  }
  std::string body_ns = GetString(m, {"namespace"});
  if (body_ns.empty()) {
    m["namespace"] = std::string(ns);
  } else if (body_ns != ns) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<WriteOutcome> RestStorage::Create(const ResourceInfo& r, std::string_view ns,
                                               Json object, const WriteOptions& options) {
  KLUTCH_RETURN_IF_ERROR(CheckTypeMeta({r.group, r.version, r.kind}, object));
  return CreateParsed(r, ns, std::move(object), options, /*managed_fields_done=*/false);
}

core::Result<WriteOutcome> RestStorage::CreateParsed(const ResourceInfo& r, std::string_view ns,
                                                     Json object, const WriteOptions& options,
                                                     bool managed_fields_done) {
  WriteOutcome out;
  KLUTCH_RETURN_IF_ERROR(CheckNamespace(r, ns, object));
  Json& m = machinery::MutableMetadata(object);
  if (GetString(m, {"name"}).empty()) {
    std::string generate = GetString(m, {"generateName"});
    if (!generate.empty()) {
      if (generate.size() > 58) generate.resize(58);
      m["name"] = generate + core::RandomSuffix(5);
    }
  }
  m["uid"] = core::NewUuid();
  m["creationTimestamp"] = Now(clock_);
  for (const char* k :
       {"resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}) {
    m.erase(k);
  }
  if (r.tracks_generation) {
    m["generation"] = 1;
  } else {
    m.erase("generation");
  }
  if (r.has_status && r.custom) object.erase("status");
  KLUTCH_RETURN_IF_ERROR(ValidateObject(r, object, nullptr, options, out.warnings));
  const std::string name = machinery::Name(object);
  KLUTCH_RETURN_IF_ERROR(CheckNamespaceForCreate(r, ns, name));
  if (!managed_fields_done) {
    Json& meta = machinery::MutableMetadata(object);
    Json base = meta.contains("managedFields") ? meta["managedFields"] : Json();
    if (!base.is_null()) {
      KLUTCH_ASSIGN_OR_RETURN(base, machinery::ValidateManagedFields(base));
    }
    meta.erase("managedFields");
    KLUTCH_ASSIGN_OR_RETURN(
        Json mf, machinery::UpdateManagedFields(Json(), object, base,
                                                Who(r, options, clock_, "Update"), r.Schema()));
    if (!mf.empty()) machinery::MutableMetadata(object)["managedFields"] = std::move(mf);
  }
  object["apiVersion"] = r.group.empty() ? r.storage_version : r.group + "/" + r.storage_version;
  // The write, once the namespace's quotas leave room for one more object.
  auto write = [&]() -> core::Status {
    if (options.dry_run) {
      KLUTCH_ASSIGN_OR_RETURN(auto existing, store_.Get(r.Key(ns, name)));
      if (existing) return AlreadyExistsError(r, name);
      ToRequestedVersion(r, object);
      out.object = std::move(object);
      out.created = true;
      return core::Status::Ok();
    }
    auto shared = std::make_shared<Json>(std::move(object));
    storage::WriteRequest w;
    w.op = storage::WriteRequest::Op::kPut;
    w.key = r.Key(ns, name);
    w.expected_mod_revision = storage::kMustNotExist;
    w.make_value = Stamp(shared);
    KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
    if (!res.succeeded) return AlreadyExistsError(r, name);
    out.object = std::move(*shared);
    ToRequestedVersion(r, out.object);
    out.created = true;
    return core::Status::Ok();
  };
  KLUTCH_RETURN_IF_ERROR(quotas_.AdmitCreate(r, ns, name, options.dry_run, write));
  if (IsResourceQuotas(r) && !options.dry_run) quotas_.QuotaWritten(ns);
  return out;
}

// ----------------------------------------------------------------------------------------
// Update

core::Result<WriteOutcome> RestStorage::WriteUpdate(const ResourceInfo& r, const std::string& key,
                                                    int64_t mod_revision, const Json& current,
                                                    Json updated, const WriteOptions& options) {
  WriteOutcome out;
  const std::string name = machinery::Name(current);
  if (ReadyToRemove(r, updated)) {
    if (options.dry_run) {
      out.object = std::move(updated);
      return out;
    }
    auto shared = std::make_shared<Json>(std::move(updated));
    storage::WriteRequest w;
    w.op = storage::WriteRequest::Op::kDelete;
    w.key = key;
    w.expected_mod_revision = mod_revision;
    w.make_value = Stamp(shared);
    KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
    if (!res.succeeded) return ConflictError(r, name, kModified);
    out.object = std::move(*shared);
    ToRequestedVersion(r, out.object);
    // (A status write never removes: it keeps the finalizers. Quota recounts write status.)
    if (options.subresource != "status") quotas_.Removed(r, machinery::Namespace(out.object));
    return out;
  }
  if (options.dry_run) {
    out.object = std::move(updated);
    return out;
  }
  auto shared = std::make_shared<Json>(std::move(updated));
  storage::WriteRequest w;
  w.op = storage::WriteRequest::Op::kPut;
  w.key = key;
  w.expected_mod_revision = mod_revision;
  w.make_value = Stamp(shared);
  KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
  if (!res.succeeded) return ConflictError(r, name, kModified);
  out.object = std::move(*shared);
  ToRequestedVersion(r, out.object);
  return out;
}

core::Result<WriteOutcome> RestStorage::GuaranteedUpdate(
    const ResourceInfo& r, std::string_view ns, std::string_view name, const WriteOptions& options,
    const Transform& transform, bool allow_create, bool apply_manages_fields) {
  const std::string key = r.Key(ns, name);
  for (int attempt = 0; attempt < kMaxUpdateAttempts; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(auto kv, store_.Get(key));
    if (!kv) {
      if (!allow_create) return NotFoundError(r, name);
      KLUTCH_ASSIGN_OR_RETURN(Json created, transform(nullptr));
      auto res = CreateParsed(r, ns, std::move(created), options, apply_manages_fields);
      if (!res.ok() && core::IsAlreadyExists(res.status())) continue;  // raced with a create
      return res;
    }
    KLUTCH_ASSIGN_OR_RETURN(Json current, Parse(kv->value));
    ToRequestedVersion(r, current);
    KLUTCH_ASSIGN_OR_RETURN(Json updated, transform(&current));
    if (!updated.is_object()) return BadRequest("the result of the update is not an object");

    // Preconditions: a resourceVersion in the result must match the current one.
    const std::string want_rv = machinery::ResourceVersion(updated);
    const std::string have_rv = machinery::ResourceVersion(current);
    if (!want_rv.empty() && want_rv != have_rv) return ConflictError(r, name, kModified);
    if (machinery::Name(updated) != name) {
      return BadRequest(
          fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                      machinery::Name(updated), name));
    }
    Json& um = machinery::MutableMetadata(updated);
    if (r.namespaced) {
      std::string body_ns = GetString(um, {"namespace"});
      if (!body_ns.empty() && body_ns != ns) {
        return BadRequest(
            "the namespace of the provided object does not match the namespace sent on the "
            "request");
      }
      um["namespace"] = std::string(ns);
    } else {
      um.erase("namespace");
    }
    CopyServerOwnedMetadata(current, updated);
    const Json* client_mf = Find(updated, {"metadata", "managedFields"});
    Json client_managed = client_mf ? *client_mf : Json();

    // Subresource separation.
    if (options.subresource == "status") {
      Json status = updated.contains("status") ? updated["status"] : Json();
      Json keep = current;
      if (status.is_null()) {
        keep.erase("status");
      } else {
        keep["status"] = std::move(status);
      }
      if (!client_managed.is_null())
        machinery::MutableMetadata(keep)["managedFields"] = client_managed;
      updated = std::move(keep);
    } else if (options.subresource == "finalize") {
      Json spec_finalizers =
          Find(updated, {"spec", "finalizers"}) ? updated["spec"]["finalizers"] : Json();
      Json keep = current;
      if (spec_finalizers.is_null()) {
        if (keep.contains("spec") && keep["spec"].is_object()) keep["spec"].erase("finalizers");
      } else {
        keep["spec"]["finalizers"] = std::move(spec_finalizers);
      }
      updated = std::move(keep);
    } else if (r.has_status) {
      if (current.contains("status")) {
        updated["status"] = current["status"];
      } else {
        updated.erase("status");
      }
    }
    updated["apiVersion"] = r.ApiVersion();
    updated["kind"] = r.kind;

    std::vector<std::string> warnings;
    KLUTCH_RETURN_IF_ERROR(ValidateObject(r, updated, &current, options, warnings));

    if (r.tracks_generation) {
      int64_t gen = 1;
      if (const Json* g = Find(current, {"metadata", "generation"}); g && g->is_number_integer()) {
        gen = g->get<int64_t>();
      }
      if (SpecPart(updated, r.has_status) != SpecPart(current, r.has_status)) ++gen;
      machinery::MutableMetadata(updated)["generation"] = gen;
    }

    // Field ownership for this write.
    const Json* current_mf = Find(current, {"metadata", "managedFields"});
    bool client_reset_managed =
        !client_managed.is_null() && (current_mf == nullptr || client_managed != *current_mf);
    if (!apply_manages_fields) {
      Json base = current_mf ? *current_mf : Json::array();
      if (client_reset_managed) {
        KLUTCH_ASSIGN_OR_RETURN(base, machinery::ValidateManagedFields(client_managed));
      }
      Json before = current, after = updated;
      machinery::MutableMetadata(before).erase("managedFields");
      machinery::MutableMetadata(after).erase("managedFields");
      if (WithoutVolatile(before) == WithoutVolatile(after) && !client_reset_managed) {
        // No change: no write, no new resourceVersion, no event.
        WriteOutcome same;
        same.object = std::move(current);
        same.warnings = std::move(warnings);
        return same;
      }
      KLUTCH_ASSIGN_OR_RETURN(
          Json mf, machinery::UpdateManagedFields(before, after, base,
                                                  Who(r, options, clock_, "Update"), r.Schema()));
      Json& meta = machinery::MutableMetadata(updated);
      if (mf.empty()) {
        meta.erase("managedFields");
      } else {
        meta["managedFields"] = std::move(mf);
      }
    } else if (WithoutVolatile(updated) == WithoutVolatile(current) &&
               SameOwnership(Find(updated, {"metadata", "managedFields"}), current_mf)) {
      WriteOutcome same;
      same.object = std::move(current);
      return same;
    }
    machinery::MutableMetadata(updated).erase("resourceVersion");
    if (r.version != r.storage_version) {
      updated["apiVersion"] =
          r.group.empty() ? r.storage_version : r.group + "/" + r.storage_version;
    }
    auto res = WriteUpdate(r, key, kv->mod_revision, current, std::move(updated), options);
    // Lost a race with another writer: transform the newer object again. A resourceVersion
    // the client put in its request then no longer matches and ends the loop with 409.
    if (!res.ok() && core::IsConflict(res.status())) continue;
    if (res.ok()) res->warnings = std::move(warnings);
    // A quota's spec changed: its status follows (the status subresource is written by the
    // recount itself).
    if (res.ok() && IsResourceQuotas(r) && options.subresource.empty() && !options.dry_run) {
      quotas_.QuotaWritten(ns);
    }
    return res;
  }
  return ConflictError(r, name, kModified);
}

core::Result<WriteOutcome> RestStorage::Update(const ResourceInfo& r, std::string_view ns,
                                               std::string_view name, Json object,
                                               const WriteOptions& options) {
  KLUTCH_RETURN_IF_ERROR(CheckTypeMeta({r.group, r.version, r.kind}, object));
  if (r.custom && options.subresource.empty() && machinery::ResourceVersion(object).empty()) {
    return machinery::InvalidObject(r.group, r.kind, name,
                                    {machinery::FieldInvalid("metadata.resourceVersion", Json(0),
                                                             "must be specified for an update")});
  }
  return GuaranteedUpdate(
      r, ns, name, options, [&](const Json*) -> core::Result<Json> { return object; },
      /*allow_create=*/false, /*apply_manages_fields=*/false);
}

core::Result<WriteOutcome> RestStorage::Mutate(
    const ResourceInfo& r, std::string_view ns, std::string_view name,
    const std::function<core::Status(Json& object)>& mutate, const WriteOptions& options) {
  return GuaranteedUpdate(
      r, ns, name, options,
      [&](const Json* current) -> core::Result<Json> {
        Json copy = *current;
        KLUTCH_RETURN_IF_ERROR(mutate(copy));
        return copy;
      },
      /*allow_create=*/false, /*apply_manages_fields=*/false);
}

core::Result<WriteOutcome> RestStorage::Patch(const ResourceInfo& r, std::string_view ns,
                                              std::string_view name, const PatchRequest& patch,
                                              const WriteOptions& options) {
  if (patch.force && patch.type != PatchType::kApply) {
    return machinery::InvalidObject(
        r.group, r.kind, name,
        {machinery::FieldInvalid("force", Json(true), "may not be specified for non-apply patch")});
  }
  if (patch.type == PatchType::kStrategic && !r.strategic_merge) {
    return core::Status(
        core::Reason::kUnsupportedMediaType,
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
  }
  if (patch.type == PatchType::kApply) {
    if (options.field_manager.empty()) {
      core::Status s(core::Reason::kInvalid,
                     "fieldManager: Required value: is required for apply patch");
      s.mutable_details().causes.push_back(
          {"FieldValueRequired", "Required value: is required for apply patch", "fieldManager"});
      return s;
    }
    KLUTCH_ASSIGN_OR_RETURN(Json applied, machinery::ParseYaml(patch.body));
    if (!applied.is_object()) return BadRequest("the apply patch must be an object");
    if (GetString(applied, {"apiVersion"}) != r.ApiVersion() ||
        GetString(applied, {"kind"}) != r.kind) {
      return BadRequest(fmt::format(
          "the API version and kind in the data ({}, {}) do not match the resource ({}, {})",
          GetString(applied, {"apiVersion"}), GetString(applied, {"kind"}), r.ApiVersion(),
          r.kind));
    }
    if (machinery::Name(applied) != name) {
      return BadRequest(
          fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                      machinery::Name(applied), name));
    }
    machinery::SchemaCursor schema = r.Schema();
    auto who = Who(r, options, clock_, "Apply");
    return GuaranteedUpdate(
        r, ns, name, options,
        [&](const Json* current) -> core::Result<Json> {
          Json live = current ? *current : Json();
          Json managed = current && Find(*current, {"metadata", "managedFields"})
                             ? (*current)["metadata"]["managedFields"]
                             : Json::array();
          if (current) machinery::MutableMetadata(live).erase("managedFields");
          KLUTCH_ASSIGN_OR_RETURN(
              machinery::ApplyResult res,
              machinery::ServerSideApply(live, applied, managed, who, patch.force, schema));
          Json out = std::move(res.object);
          if (current) {
            machinery::MutableMetadata(out)["resourceVersion"] =
                machinery::ResourceVersion(*current);
          }
          if (res.managed_fields.is_array() && !res.managed_fields.empty()) {
            machinery::MutableMetadata(out)["managedFields"] = std::move(res.managed_fields);
          } else {
            machinery::MutableMetadata(out).erase("managedFields");
          }
          return out;
        },
        /*allow_create=*/options.subresource.empty(), /*apply_manages_fields=*/true);
  }

  core::Result<Json> parsed_patch = machinery::ParseJson(patch.body);
  if (!parsed_patch.ok()) return parsed_patch.status();
  const Json& p = *parsed_patch;
  if (patch.type != PatchType::kJson && !p.is_object()) {
    return BadRequest("the patch must be a JSON object");
  }
  machinery::SchemaCursor schema = r.Schema();
  return GuaranteedUpdate(
      r, ns, name, options,
      [&](const Json* current) -> core::Result<Json> {
        switch (patch.type) {
          case PatchType::kJson: {
            auto res = machinery::ApplyJsonPatch(*current, p);
            if (!res.ok()) {
              if (res.status().reason() == core::Reason::kBadRequest) return res.status();
              core::Status s(core::Reason::kInvalid,
                             "the server rejected our request due to an error in our request");
              s.mutable_details().causes.push_back({"", res.status().message(), ""});
              return s;
            }
            return res;
          }
          case PatchType::kMerge:
            return machinery::ApplyMergePatch(*current, p);
          case PatchType::kStrategic:
            return machinery::ApplyStrategicMergePatch(*current, p, schema);
          case PatchType::kApply:
            break;
        }
        return core::Internal("unreachable patch type");
      },
      /*allow_create=*/false, /*apply_manages_fields=*/false);
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

// ----------------------------------------------------------------------------------------
// Delete

core::Result<DeleteOutcome> RestStorage::Delete(const ResourceInfo& r, std::string_view ns,
                                                std::string_view name,
                                                const DeleteOptions& options) {
  std::string policy = options.propagation_policy;
  if (policy.empty() && options.orphan_dependents.has_value()) {
    policy = *options.orphan_dependents ? "Orphan" : "Background";
  }
  if (!policy.empty() && policy != "Orphan" && policy != "Background" && policy != "Foreground") {
    core::Status s(core::Reason::kInvalid,
                   fmt::format("propagationPolicy: Unsupported value: \"{}\": supported values: "
                               "\"Foreground\", \"Background\", \"Orphan\"",
                               policy));
    return s;
  }
  const std::string key = r.Key(ns, name);
  for (int attempt = 0; attempt < kMaxUpdateAttempts; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(auto kv, store_.Get(key));
    if (!kv) return NotFoundError(r, name);
    KLUTCH_ASSIGN_OR_RETURN(Json current, Parse(kv->value));
    ToRequestedVersion(r, current);
    if (!options.precondition_uid.empty() && options.precondition_uid != machinery::Uid(current)) {
      return ConflictError(r, name,
                           fmt::format("Precondition failed: UID in precondition: {}, UID in "
                                       "object meta: {}",
                                       options.precondition_uid, machinery::Uid(current)));
    }
    if (!options.precondition_resource_version.empty() &&
        options.precondition_resource_version != machinery::ResourceVersion(current)) {
      return ConflictError(
          r, name,
          fmt::format("Precondition failed: ResourceVersion in precondition: {}, "
                      "ResourceVersion in object meta: {}",
                      options.precondition_resource_version, machinery::ResourceVersion(current)));
    }
    Json updated = current;
    std::vector<std::string> add;
    if (policy == "Foreground") add.push_back("foregroundDeletion");
    if (policy == "Orphan") add.push_back("orphan");
    bool graceful = !machinery::Finalizers(current).empty() || !add.empty();
    if (IsNamespaces(r)) {
      const Json* f = Find(current, {"spec", "finalizers"});
      if (f && f->is_array() && !f->empty()) graceful = true;
    }
    DeleteOutcome out;
    if (!graceful) {
      out.deleted = true;
      if (options.dry_run) {
        out.object = std::move(current);
        return out;
      }
      auto tomb = std::make_shared<Json>(current);
      storage::WriteRequest w;
      w.op = storage::WriteRequest::Op::kDelete;
      w.key = key;
      w.expected_mod_revision = kv->mod_revision;
      w.make_value = Stamp(tomb);
      KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
      if (!res.succeeded) continue;
      out.object = std::move(*tomb);
      quotas_.Removed(r, ns);
      return out;
    }
    // Graceful: mark for deletion and let the finalizers' owners finish.
    Json& m = machinery::MutableMetadata(updated);
    bool changed = false;
    if (!machinery::IsBeingDeleted(current)) {
      m["deletionTimestamp"] = Now(clock_);
      m["deletionGracePeriodSeconds"] = 0;
      changed = true;
    }
    for (const auto& f : add) {
      if (!machinery::HasFinalizer(updated, f)) {
        if (!m.contains("finalizers") || !m["finalizers"].is_array())
          m["finalizers"] = Json::array();
        m["finalizers"].push_back(f);
        changed = true;
      }
    }
    if (IsNamespaces(r)) {
      if (GetString(updated, {"status", "phase"}) != "Terminating") {
        updated["status"]["phase"] = "Terminating";
        changed = true;
      }
    }
    if (!changed) {
      out.object = std::move(current);
      return out;
    }
    if (options.dry_run) {
      out.object = std::move(updated);
      return out;
    }
    m.erase("resourceVersion");
    auto shared = std::make_shared<Json>(std::move(updated));
    storage::WriteRequest w;
    w.op = storage::WriteRequest::Op::kPut;
    w.key = key;
    w.expected_mod_revision = kv->mod_revision;
    w.make_value = Stamp(shared);
    KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
    if (!res.succeeded) continue;
    out.object = std::move(*shared);
    return out;
  }
  return ConflictError(r, name, kModified);
}

core::Result<std::vector<Json>> RestStorage::DeleteCollection(const ResourceInfo& r,
                                                              std::string_view ns,
                                                              const ListOptions& list,
                                                              const DeleteOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(ListOutcome items, List(r, ns, list));
  std::vector<Json> out;
  for (auto& item : items.items) {
    const Json& obj = item.Object();
    auto res = Delete(r, machinery::Namespace(obj), machinery::Name(obj), options);
    if (!res.ok()) {
      if (core::IsNotFound(res.status())) continue;
      return res.status();
    }
    out.push_back(std::move(res->object));
  }
  return out;
}

}  // namespace klutch::apiserver
