#include "client/dynamic.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::client {

std::string ResourcePath(const GroupVersionResource& gvr, std::string_view ns,
                         std::string_view name, std::string_view subresource) {
  std::string p =
      gvr.group.empty() ? "/api/" + gvr.version : "/apis/" + gvr.group + "/" + gvr.version;
  if (!ns.empty()) p += "/namespaces/" + core::PercentEncode(ns);
  p += "/" + gvr.resource;
  if (!name.empty()) p += "/" + core::PercentEncode(name);
  if (!subresource.empty()) p += "/" + std::string(subresource);
  return p;
}

namespace {

void AddList(Request& r, const ListOptions& o) {
  if (!o.label_selector.empty()) r.query.emplace_back("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) r.query.emplace_back("fieldSelector", o.field_selector);
  if (o.limit > 0) r.query.emplace_back("limit", std::to_string(o.limit));
  if (!o.continue_token.empty()) r.query.emplace_back("continue", o.continue_token);
  if (!o.resource_version.empty()) r.query.emplace_back("resourceVersion", o.resource_version);
  if (!o.resource_version_match.empty()) {
    r.query.emplace_back("resourceVersionMatch", o.resource_version_match);
  }
}

void AddWrite(Request& r, const WriteOptions& o) {
  if (!o.field_manager.empty()) r.query.emplace_back("fieldManager", o.field_manager);
  if (o.dry_run) r.query.emplace_back("dryRun", "All");
  if (!o.field_validation.empty()) r.query.emplace_back("fieldValidation", o.field_validation);
  if (o.force) r.query.emplace_back("force", "true");
}

Json DeleteBody(const DeleteOptions& o) {
  Json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!o.propagation_policy.empty()) body["propagationPolicy"] = o.propagation_policy;
  if (o.precondition_uid) body["preconditions"]["uid"] = *o.precondition_uid;
  if (o.precondition_resource_version) {
    body["preconditions"]["resourceVersion"] = *o.precondition_resource_version;
  }
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (o.dry_run) body["dryRun"] = Json::array({"All"});
  return body;
}

}  // namespace

Request ResourceClient::Make(std::string verb, std::string_view name,
                             std::string_view subresource) const {
  Request r;
  r.verb = std::move(verb);
  r.path = ResourcePath(gvr_, ns_, name, subresource);
  return r;
}

core::Result<Json> ResourceClient::Get(std::string_view name, std::string_view subresource) const {
  return rest_->DoJson(Make("GET", name, subresource));
}

core::Result<Json> ResourceClient::List(const ListOptions& options) const {
  Request r = Make("GET");
  AddList(r, options);
  if (!options.skip_managed_fields) return rest_->DoJson(r);
  KLUTCH_ASSIGN_OR_RETURN(Response resp, rest_->Do(r));
  Json list = ParseWithoutManagedFields(resp.body, 3);
  if (list.is_discarded()) {
    return core::Internal(fmt::format("GET {}: the response is not JSON", r.path));
  }
  return list;
}

core::Result<Json> ResourceClient::ListAll(ListOptions options) const {
  if (options.limit <= 0) options.limit = 500;
  KLUTCH_ASSIGN_OR_RETURN(Json first, List(options));
  std::string next = machinery::GetString(first, {"metadata", "continue"});
  // Later pages come from the first page's snapshot: the continue token carries it.
  options.resource_version.clear();
  options.resource_version_match.clear();
  while (!next.empty()) {
    options.continue_token = next;
    KLUTCH_ASSIGN_OR_RETURN(Json page, List(options));
    if (page.contains("items") && page["items"].is_array()) {
      for (auto& item : page["items"]) first["items"].push_back(std::move(item));
    }
    next = machinery::GetString(page, {"metadata", "continue"});
  }
  if (first.contains("metadata") && first["metadata"].is_object()) {
    first["metadata"].erase("continue");
    first["metadata"].erase("remainingItemCount");
  }
  return first;
}

core::Result<Json> ResourceClient::Create(const Json& object, const WriteOptions& options) const {
  Request r = Make("POST");
  AddWrite(r, options);
  r.body = machinery::Dump(object);
  return rest_->DoJson(r);
}

core::Result<Json> ResourceClient::Update(const Json& object, const WriteOptions& options) const {
  Request r = Make("PUT", machinery::Name(object));
  AddWrite(r, options);
  r.body = machinery::Dump(object);
  return rest_->DoJson(r);
}

core::Result<Json> ResourceClient::UpdateStatus(const Json& object,
                                                const WriteOptions& options) const {
  Request r = Make("PUT", machinery::Name(object), "status");
  AddWrite(r, options);
  r.body = machinery::Dump(object);
  return rest_->DoJson(r);
}

core::Result<Json> ResourceClient::Patch(std::string_view name, PatchType type,
                                         const std::string& patch, const WriteOptions& options,
                                         std::string_view subresource) const {
  Request r = Make("PATCH", name, subresource);
  AddWrite(r, options);
  switch (type) {
    case PatchType::kMerge:
      r.content_type = "application/merge-patch+json";
      break;
    case PatchType::kStrategicMerge:
      r.content_type = "application/strategic-merge-patch+json";
      break;
    case PatchType::kJsonPatch:
      r.content_type = "application/json-patch+json";
      break;
    case PatchType::kApply:
      r.content_type = "application/apply-patch+yaml";
      break;
  }
  r.body = patch;
  return rest_->DoJson(r);
}

core::Result<Json> ResourceClient::Delete(std::string_view name,
                                          const DeleteOptions& options) const {
  Request r = Make("DELETE", name);
  r.body = machinery::Dump(DeleteBody(options));
  return rest_->DoJson(r);
}

core::Result<Json> ResourceClient::DeleteCollection(const ListOptions& selection,
                                                    const DeleteOptions& options) const {
  Request r = Make("DELETE");
  AddList(r, selection);
  r.body = machinery::Dump(DeleteBody(options));
  return rest_->DoJson(r);
}

core::Result<WatchEnd> ResourceClient::Watch(const WatchOptions& options,
                                             const std::function<bool(const WatchEvent&)>& on_event,
                                             StreamCanceller* canceller,
                                             std::string_view accept) const {
  Request r = Make("GET");
  r.accept = std::string(accept);
  r.idle_timeout = options.idle_timeout;
  r.query.emplace_back("watch", "true");
  if (!options.label_selector.empty())
    r.query.emplace_back("labelSelector", options.label_selector);
  if (!options.field_selector.empty())
    r.query.emplace_back("fieldSelector", options.field_selector);
  if (!options.resource_version.empty()) {
    r.query.emplace_back("resourceVersion", options.resource_version);
  }
  if (options.allow_bookmarks) r.query.emplace_back("allowWatchBookmarks", "true");
  if (options.timeout_seconds > 0) {
    r.query.emplace_back("timeoutSeconds", std::to_string(options.timeout_seconds));
  }
  if (options.send_initial_events) {
    r.query.emplace_back("sendInitialEvents", "true");
    r.query.emplace_back("resourceVersionMatch", "NotOlderThan");
  }

  WatchEnd end;
  end.last_resource_version = options.resource_version;
  WatchDecoder decoder(WatchDecoder::kDefaultMaxEventBytes, options.skip_managed_fields);
  core::Status decode_error;
  bool stopped = false;
  auto on_data = [&](std::string_view data) {
    decode_error = decoder.Feed(data, [&](WatchEvent e) {
      if (e.type == EventType::kError) {
        core::Status st = machinery::StatusFromJson(*e.object);
        if (core::IsGone(st) || st.code() == 410) {
          end.gone = true;
        } else {
          end.error = st.ToString();
        }
        stopped = true;
        return false;
      }
      std::string rv = machinery::ResourceVersion(*e.object);
      if (!on_event(e)) {
        stopped = true;
        return false;
      }
      if (!rv.empty()) end.last_resource_version = rv;
      return true;
    });
    return decode_error.ok() && !stopped;
  };
  KLUTCH_ASSIGN_OR_RETURN(StreamEnd s, rest_->Stream(r, on_data, canceller));
  if (s.status < 200 || s.status >= 300) {
    Json body = Json::parse(s.body, nullptr, false);
    core::Status st = body.is_object() ? machinery::StatusFromJson(body) : core::Status::Ok();
    if (st.ok()) {
      st = core::Status(core::Reason::kUnknown,
                        fmt::format("watch {}: the server responded with {}", r.path, s.status));
    }
    if (s.status == 410) {
      end.gone = true;
      return end;
    }
    return st.set_code(s.status);
  }
  end.cancelled = s.cancelled;
  if (!decode_error.ok()) {
    end.complete = false;
    end.error = decode_error.message();
  } else if (!s.complete && !stopped) {
    end.complete = false;
    end.error = s.error;
  } else if (!stopped && decoder.pending_bytes() > 0) {
    end.complete = false;
    end.error = "watch stream: the stream ended inside an event";
  }
  return end;
}

}  // namespace klutch::client
