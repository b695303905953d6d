#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "apiserver/rest_storage.h"
#include "apiserver/rest_storage_internal.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "machinery/validation.h"

// RestStorage::List: one store snapshot, selectors, limit/continue, resourceVersion and
// resourceVersionMatch.

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

const Json& ListItem::Object() {
  if (!parsed) {
    auto r = machinery::ParseJson(*raw);
    parsed = std::make_shared<const Json>(r.ok() ? std::move(r).value() : Json::object());
  }
  return *parsed;
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
  if (!bytes) return core::BadRequest("continue key is not valid: illegal base64 data");
  auto j = machinery::ParseJson(*bytes);
  if (!j.ok() || !j->is_object()) return core::BadRequest("continue key is not valid: not JSON");
  const Json* rv = Find(*j, {"rv"});
  const Json* start = Find(*j, {"start"});
  if (GetString(*j, {"v"}) != "meta.k8s.io/v1" || !rv || !rv->is_number_integer() || !start ||
      !start->is_string()) {
    return core::BadRequest("continue key is not valid: incorrect encoded start resourceVersion");
  }
  ContinueToken out{rv->get<int64_t>(), start->get<std::string>()};
  if (out.revision <= 0 || out.start.find("..") != std::string::npos) {
    return core::BadRequest("continue key is not valid: incorrect encoded start resourceVersion");
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

// Where a list starts: the store revision to read at (0: the newest) and the key to resume
// after, from resourceVersion, resourceVersionMatch and continue.
struct ListStart {
  int64_t revision = 0;
  std::string start_after;
};

core::Result<ListStart> ResolveListStart(storage::Store& store, const std::string& prefix,
                                         const ListOptions& options) {
  ListStart start;
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
      return core::BadRequest(fmt::format("Invalid value: \"{}\": must be a number", rv));
    }
  }
  if (!options.continue_token.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(ContinueToken token, DecodeContinue(options.continue_token));
    start.revision = token.revision;
    start.start_after = prefix + token.start;
    if (start.revision < store.CompactedRevision()) {
      return core::Status(core::Reason::kExpired, kContinueTooOld);
    }
  } else if (match == "Exact") {
    start.revision = *rv_number;
  } else if (rv_number && *rv_number > 0) {
    // NotOlderThan: wait a little for the store to catch up, then fail as kube does.
    if (!store.WaitForRevision(*rv_number, std::chrono::seconds(3))) {
      core::Status s(
          core::Reason::kTimeout,
          fmt::format("Too large resource version: {}, current: {}", *rv_number, store.Revision()));
      s.mutable_details().causes.push_back(
          {"ResourceVersionTooLarge", "Too large resource version", ""});
      s.mutable_details().retry_after_seconds = 1;
      return s;
    }
  }
  return start;
}

}  // namespace

core::Result<ListOutcome> RestStorage::List(const ResourceInfo& r, std::string_view ns,
                                            const ListOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(Filter filter,
                          Filter::Make(r, options.label_selector, options.field_selector));
  std::string prefix = r.KeyPrefix();
  if (r.namespaced && !ns.empty()) prefix += std::string(ns) + "/";

  KLUTCH_ASSIGN_OR_RETURN(ListStart start, ResolveListStart(store_, prefix, options));
  std::string start_after = std::move(start.start_after);

  // A field selector on metadata.name narrows the scan to one key per namespace.
  ListOutcome out;
  const bool needs_parse = !filter.Empty() || r.TransformsOnRead();
  const int64_t limit = options.limit > 0 ? options.limit : 0;
  std::string last_key;
  bool more = false;
  int64_t snapshot = start.revision;
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
          internal::ToRequestedVersion(r, copy);
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

}  // namespace klutch::apiserver
