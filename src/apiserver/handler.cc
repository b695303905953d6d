#include "apiserver/handler.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "apiserver/discovery.h"
#include "apiserver/request_info.h"
#include "apiserver/reviews.h"
#include "apiserver/scale.h"
#include "apiserver/table.h"
#include "auth/rbac.h"
#include "codec/protobuf.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/selector.h"
#include "serving/endpoints.h"
#include "serving/json_response.h"

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

namespace {

constexpr const char* kJson = "application/json";

// A JSON answer (serving::SerializedJsonResponse) private and uncached, as kube-apiserver's.
http::Response JsonResponse(int code, std::string body) {
  http::Response r = serving::SerializedJsonResponse(code, std::move(body));
  r.headers.Set("Cache-Control", "no-cache, private");
  return r;
}

// machinery::Dump replaces invalid UTF-8 (which can come from a client's path or body)
// instead of throwing.
http::Response JsonResponse(int code, const Json& body) {
  return JsonResponse(code, machinery::Dump(body));
}

core::Status PathNotFound() {
  core::Status s(core::Reason::kNotFound, "the server could not find the requested resource");
  s.set_details({});
  return s;
}

core::Status MethodNotAllowed() {
  return core::Status(core::Reason::kMethodNotAllowed,
                      "the server does not allow this method on the requested resource");
}

std::string MediaType(std::string_view content_type) {
  auto semi = content_type.find(';');
  return core::ToLower(core::Trim(content_type.substr(0, semi)));
}

void AddWarnings(http::Response& resp, const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) {
    resp.headers.Add("Warning", "299 - " + machinery::Dump(Json(w)));
  }
}

// Decodes a create/update body by its Content-Type; repeated JSON keys go to `duplicates`.
core::Result<Json> DecodeBody(const ResourceInfo& r, const http::Request& req,
                              std::vector<std::string>& duplicates) {
  const std::string type = MediaType(req.headers.Get("Content-Type"));
  auto wrap = [&](const core::Status& s) {
    return core::BadRequest(fmt::format("{} in version \"{}\" cannot be handled as a {}: {}",
                                        r.kind, r.version, r.kind, s.message()));
  };
  if (type.empty() || type == kJson) {
    auto j = machinery::ParseJsonReportingDuplicates(req.body, duplicates);
    if (!j.ok()) return wrap(j.status());
    return j;
  }
  if (type == "application/yaml") {
    auto j = machinery::ParseYaml(req.body);
    if (!j.ok()) return wrap(j.status());
    return j;
  }
  if (type == "application/vnd.kubernetes.protobuf" && !r.custom) {
    auto j = codec::DecodeKubernetesProtobuf(req.body);
    if (!j.ok()) {
      if (j.status().reason() == core::Reason::kUnsupportedMediaType) return j.status();
      return wrap(j.status());
    }
    return j;
  }
  return core::Status(core::Reason::kUnsupportedMediaType,
                      fmt::format("the body of the request was in an unknown format - accepted "
                                  "media types include: application/json, application/yaml{}",
                                  r.custom ? "" : ", application/vnd.kubernetes.protobuf"));
}

core::Result<WriteOptions> ParseWriteOptions(const http::Request& req, bool apply_patch) {
  WriteOptions o;
  if (auto dry = req.Query("dryRun")) {
    if (*dry != "All") {
      return core::Status(
          core::Reason::kInvalid,
          fmt::format("dryRun: Unsupported value: \"{}\": supported values: \"All\"", *dry));
    }
    o.dry_run = true;
  }
  if (auto fm = req.Query("fieldManager")) {
    if (fm->size() > 128) {
      return core::Status(core::Reason::kInvalid,
                          "fieldManager: Too long: may not be more than 128 bytes");
    }
    for (unsigned char c : *fm) {
      if (c < 0x20 || c > 0x7e) {
        return core::Status(core::Reason::kInvalid,
                            "fieldManager: Invalid value: must only contain printable characters");
      }
    }
    o.field_manager = std::string(*fm);
  } else if (!apply_patch) {
    o.field_manager = DefaultFieldManager(req.headers.Get("User-Agent"));
  }
  if (auto fv = req.Query("fieldValidation")) {
    if (*fv == "Strict") {
      o.field_validation = FieldValidation::kStrict;
    } else if (*fv == "Warn") {
      o.field_validation = FieldValidation::kWarn;
    } else if (*fv == "Ignore") {
      o.field_validation = FieldValidation::kIgnore;
    } else {
      return core::BadRequest(fmt::format(
          "fieldValidation: Unsupported value: \"{}\": supported values: \"Ignore\", \"Strict\", "
          "\"Warn\"",
          *fv));
    }
  }
  return o;
}

core::Result<DeleteOptions> ParseDeleteOptions(const http::Request& req) {
  DeleteOptions o;
  Json body;
  if (!core::Trim(req.body).empty()) {
    const std::string type = MediaType(req.headers.Get("Content-Type"));
    core::Result<Json> parsed = type == "application/vnd.kubernetes.protobuf"
                                    ? codec::DecodeKubernetesProtobuf(req.body)
                                    : machinery::ParseJson(req.body);
    if (!parsed.ok())
      return core::BadRequest("invalid DeleteOptions: " + parsed.status().message());
    body = std::move(parsed).value();
  }
  if (body.is_object()) {
    o.propagation_policy = GetString(body, {"propagationPolicy"});
    if (const Json* od = Find(body, {"orphanDependents"}); od && od->is_boolean()) {
      o.orphan_dependents = od->get<bool>();
    }
    o.precondition_uid = GetString(body, {"preconditions", "uid"});
    o.precondition_resource_version = GetString(body, {"preconditions", "resourceVersion"});
    if (const Json* dry = Find(body, {"dryRun"}); dry && dry->is_array()) {
      for (const auto& d : *dry) {
        if (d != "All") {
          return core::Status(
              core::Reason::kInvalid,
              fmt::format("dryRun: Unsupported value: {}: supported values: \"All\"",
                          machinery::Dump(d)));
        }
        o.dry_run = true;
      }
    }
  }
  if (auto p = req.Query("propagationPolicy")) o.propagation_policy = std::string(*p);
  if (auto od = req.Query("orphanDependents")) o.orphan_dependents = *od == "true";
  if (auto dry = req.Query("dryRun")) {
    if (*dry != "All") {
      return core::Status(
          core::Reason::kInvalid,
          fmt::format("dryRun: Unsupported value: \"{}\": supported values: \"All\"", *dry));
    }
    o.dry_run = true;
  }
  return o;
}

core::Result<ListOptions> ParseListOptions(const http::Request& req) {
  ListOptions o;
  if (auto v = req.Query("labelSelector")) o.label_selector = std::string(*v);
  if (auto v = req.Query("fieldSelector")) o.field_selector = std::string(*v);
  if (auto v = req.Query("limit")) {
    auto n = core::ParseInt64(*v);
    if (!n || *n < 0) return core::BadRequest(fmt::format("limit: Invalid value: \"{}\"", *v));
    o.limit = *n;
  }
  if (auto v = req.Query("continue")) o.continue_token = std::string(*v);
  if (auto v = req.Query("resourceVersion")) o.resource_version = std::string(*v);
  if (auto v = req.Query("resourceVersionMatch")) o.resource_version_match = std::string(*v);
  return o;
}

IncludeObject ParseInclude(const http::Request& req) {
  auto v = req.Query("includeObject");
  if (!v) return IncludeObject::kMetadata;
  if (*v == "None") return IncludeObject::kNone;
  if (*v == "Object") return IncludeObject::kObject;
  return IncludeObject::kMetadata;
}

}  // namespace

ApiHandler::ApiHandler(RestStorage& storage, Registry& registry, OpenApi& openapi,
                       WatchManager& watches, AccessControl& access, HandlerOptions options)
    : storage_(storage),
      registry_(registry),
      openapi_(openapi),
      watches_(watches),
      access_(access),
      options_(std::move(options)),
      router_(NonResourceRoutes()) {}

bool ApiHandler::IsQuick(const RequestInfo& info) {
  if (info.resource_request) return info.verb == "get";
  // Discovery, liveness and version: small answers from memory. The OpenAPI documents and
  // the metrics text are big; readiness (also in /healthz) may wait for the access feed.
  if (info.verb != "get") return false;
  for (std::string_view slow : {"/openapi", "/metrics", "/readyz", "/healthz"}) {
    if (info.path.starts_with(slow)) return false;
  }
  return true;
}

http::Response ApiHandler::StatusResponse(const core::Status& status) {
  http::Response r = JsonResponse(status.code(), machinery::StatusToJson(status));
  if (status.details() && status.details()->retry_after_seconds > 0) {
    r.headers.Set("Retry-After", std::to_string(status.details()->retry_after_seconds));
  }
  return r;
}

http::Response ApiHandler::Handle(http::Request& req, const RequestInfo& info, const Caller& caller,
                                  AuditFacts* facts) {
  if (info.resource_request) return HandleResource(req, info, caller, facts);
  return router_.Serve(req);
}

http::Router ApiHandler::NonResourceRoutes() {
  // 404 and 405 as kube-apiserver words them, as Status objects.
  http::Router router([](int code, std::string) {
    if (code == 405) return StatusResponse(MethodNotAllowed());
    return StatusResponse(PathNotFound());
  });
  router.Get("/", [](http::Request&, const http::PathParams&) {
    Json paths = Json::array({"/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics",
                              "/openapi/v2", "/openapi/v3", "/readyz", "/version"});
    return JsonResponse(200, Json{{"paths", paths}});
  });
  if (options_.health) {
    options_.health->AddRoutes(router);
  } else {
    static const serving::HealthChecks kPingOnly;
    kPingOnly.AddRoutes(router);
  }
  if (options_.metrics) serving::AddMetricsRoute(router, *options_.metrics);
  router.Get("/version", [this](http::Request&, const http::PathParams&) {
    Json v = {{"major", "1"},
              {"minor", options_.version_minor},
              {"gitVersion", "v1." + options_.version_minor + ".0-klutch"},
              {"gitCommit", "klutch"},
              {"gitTreeState", "clean"},
              {"buildDate", "2026-01-01T00:00:00Z"},
              {"goVersion", "n/a"},
              {"compiler", "gcc"},
              {"platform", "linux/amd64"}};
    return JsonResponse(200, v);
  });
  // Service-account issuer discovery: other parties verify our tokens with these.
  router.Get("/.well-known/openid-configuration",
             [this](http::Request& req, const http::PathParams&) {
               std::string host(req.headers.Get("Host"));
               if (host.empty()) host = options_.server_address;
               const std::string jwks_uri = "https://" + host + "/openid/v1/jwks";
               http::Response r =
                   JsonResponse(200, Json{{"issuer", access_.options().service_account_issuer},
                                          {"jwks_uri", jwks_uri},
                                          {"response_types_supported", {"id_token"}},
                                          {"subject_types_supported", {"public"}},
                                          {"id_token_signing_alg_values_supported", {"RS256"}}});
               r.headers.Set("Cache-Control", "public, max-age=3600");
               return r;
             });
  router.Get("/openid/v1/jwks", [this](http::Request&, const http::PathParams&) {
    http::Response r = JsonResponse(200, access_.tokens().PublicJwks());
    r.headers.Set("Content-Type", "application/jwk-set+json");
    return r;
  });
  router.Get("/openapi/v2",
             [this](http::Request& req, const http::PathParams&) { return OpenApiV2(req); });
  router.Get("/openapi/v3/{path...}", [this](http::Request& req, const http::PathParams& p) {
    return OpenApiV3(req, p.Get("path"));
  });
  // Discovery: /api, /api/<version>, /apis, /apis/<group>, /apis/<group>/<version>.
  router.Get("/api", [this](http::Request& req, const http::PathParams&) {
    return DiscoveryRoot(req, /*legacy=*/true);
  });
  router.Get("/apis", [this](http::Request& req, const http::PathParams&) {
    return DiscoveryRoot(req, /*legacy=*/false);
  });
  router.Get("/api/{version}", [this](http::Request&, const http::PathParams& p) {
    if (p.Get("version") != "v1") return StatusResponse(PathNotFound());
    return JsonResponse(200, LegacyResourceList(registry_, "", "v1"));
  });
  router.Get("/apis/{group}", [this](http::Request&, const http::PathParams& p) {
    Json g = LegacyApiGroup(registry_, std::string(p.Get("group")));
    if (g.is_null()) return StatusResponse(PathNotFound());
    return JsonResponse(200, g);
  });
  router.Get("/apis/{group}/{version}", [this](http::Request&, const http::PathParams& p) {
    Json list =
        LegacyResourceList(registry_, std::string(p.Get("group")), std::string(p.Get("version")));
    if (list.is_null()) return StatusResponse(PathNotFound());
    return JsonResponse(200, list);
  });
  return router;
}

http::Response ApiHandler::DiscoveryRoot(http::Request& req, bool legacy) {
  std::string agg = AggregatedDiscoveryVersion(req.headers.Get("Accept"));
  if (!agg.empty()) {
    http::Response r = JsonResponse(200, AggregatedDiscovery(registry_, legacy, agg));
    r.headers.Set("Content-Type",
                  agg == "v2" ? kAggregatedDiscoveryType : kAggregatedDiscoveryTypeBeta);
    r.headers.Set("Vary", "Accept");
    return r;
  }
  http::Response r = JsonResponse(
      200, legacy ? LegacyApiVersions(options_.server_address) : LegacyApiGroupList(registry_));
  r.headers.Set("Vary", "Accept");
  return r;
}

http::Response ApiHandler::HandleScale(http::Request& req, const ResourceInfo& r,
                                       const std::string& ns, const std::string& name) {
  core::Result<Json> out = core::Internal("unreachable");
  if (req.method == "GET") {
    out = GetScale(storage_, r, ns, name);
  } else if (req.method == "PUT" || req.method == "PATCH") {
    auto opts = ParseWriteOptions(req, false);
    if (!opts.ok()) return StatusResponse(opts.status());
    if (req.method == "PUT") {
      auto body = machinery::ParseJson(req.body);
      if (!body.ok()) return StatusResponse(body.status());
      out = UpdateScale(storage_, r, ns, name, &*body, nullptr, *opts);
    } else {
      PatchRequest patch;
      const std::string type = MediaType(req.headers.Get("Content-Type"));
      if (type == "application/json-patch+json") {
        patch.type = PatchType::kJson;
      } else if (type == "application/merge-patch+json" ||
                 type == "application/strategic-merge-patch+json") {
        patch.type = PatchType::kMerge;  // Scale has no lists: both mean the same here
      } else {
        return StatusResponse(core::Status(core::Reason::kUnsupportedMediaType,
                                           "the body of the request was in an unknown format - "
                                           "accepted media types include: "
                                           "application/json-patch+json, "
                                           "application/merge-patch+json, "
                                           "application/strategic-merge-patch+json"));
      }
      patch.body = req.body;
      out = UpdateScale(storage_, r, ns, name, nullptr, &patch, *opts);
    }
  } else {
    return StatusResponse(MethodNotAllowed());
  }
  if (!out.ok()) return StatusResponse(out.status());
  return JsonResponse(200, *out);
}

http::Response ApiHandler::OpenApiV2(http::Request& req) {
  // kubectl asks for gnostic's protobuf encoding and parses the body as protobuf whatever the
  // Content-Type says, so JSON goes only to clients that ask for JSON.
  const std::string_view accept = req.headers.Get("Accept");
  const bool protobuf = accept.find("protobuf") != std::string_view::npos;
  auto doc = protobuf ? openapi_.V2Protobuf() : openapi_.V2Json();
  if (!doc) return StatusResponse(PathNotFound());
  http::Response r = JsonResponse(200, doc->body);
  if (protobuf) {
    r.headers.Set("Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
  }
  r.headers.Set("Etag", "\"" + doc->hash + "\"");
  r.headers.Set("Vary", "Accept");
  return r;
}

http::Response ApiHandler::OpenApiV3(http::Request& req, std::string_view path) {
  if (path.empty()) return JsonResponse(200, openapi_.Root());
  auto doc = openapi_.ForPath(path);
  if (!doc) return StatusResponse(PathNotFound());
  http::Response r = JsonResponse(200, doc->body);
  r.headers.Set("Etag", "\"" + doc->hash + "\"");
  auto hash = req.Query("hash");
  if (hash && *hash == doc->hash) {
    r.headers.Set("Cache-Control", "public, immutable");
    r.headers.Set("Expires", "Fri, 01 Jan 2100 00:00:00 GMT");
  } else {
    r.headers.Set("Cache-Control", "no-cache, private");
  }
  return r;
}

http::Response ApiHandler::HandleResource(http::Request& req, const RequestInfo& info,
                                          const Caller& caller, AuditFacts* facts) {
  // Routed from the one RequestInfo: [namespaces/<ns>/]<resource>[/<name>[/<subresource>]].
  if (info.extra_segments || !registry_.HasGroupVersion(info.api_group, info.api_version)) {
    return StatusResponse(PathNotFound());
  }
  const std::string& group = info.api_group;
  const std::string& version = info.api_version;
  const std::string& resource = info.resource;
  const std::string& sub = info.subresource;
  const std::string name = info.name_from_field_selector ? std::string() : info.name;
  // kube's request info reads /namespaces/<name>[/status|/finalize] as resource "namespaces"
  // in namespace <name>; a namespace itself lives in no namespace.
  std::string ns = info.ns;
  if (resource == "namespaces" && ns == name) ns.clear();
  ResourcePtr rp = registry_.Find(group, version, resource);
  if (!rp) return StatusResponse(PathNotFound());
  const ResourceInfo& r = *rp;
  if (!ns.empty() && !r.namespaced) return StatusResponse(PathNotFound());
  if (!sub.empty() && !r.HasSubresource(sub)) return StatusResponse(PathNotFound());
  if (r.namespaced && ns.empty() && (!name.empty() || r.create_only)) {
    return StatusResponse(PathNotFound());
  }
  if (sub == "scale") return HandleScale(req, r, ns, name);
  if (r.create_only || sub == "token") {
    if (req.method != "POST" || (r.create_only && !name.empty()) ||
        (sub == "token" && name.empty())) {
      return StatusResponse(MethodNotAllowed());
    }
    std::vector<std::string> duplicates;
    auto body = DecodeBody(r, req, duplicates);
    if (!body.ok()) return StatusResponse(body.status());
    auto out = sub == "token"
                   ? CreateServiceAccountToken(storage_, access_, ns, name, std::move(*body))
                   : CreateReview(r, ns, std::move(*body), caller, access_);
    if (!out.ok()) return StatusResponse(out.status());
    return JsonResponse(201, *out);
  }
  if (!sub.empty() && sub != "status" && sub != "finalize") {
    return StatusResponse(core::Status(
        core::Reason::kMethodNotAllowed,
        fmt::format("the {} subresource of {} is not served yet", sub, r.GroupResource())));
  }

  // RBAC writes pass the escalation check as the caller; writes the authorizer or the token
  // caches depend on return once those have caught up, so the caller's next request sees them.
  const bool rbac_kind = r.group == auth::kRbacGroup;
  const bool feeds_access =
      rbac_kind || (r.group.empty() && (r.plural == "serviceaccounts" || r.plural == "secrets"));
  auto guard = [&](WriteOptions& o) {
    if (!rbac_kind) return;
    o.admit = [this, &caller](const Json& object, const Json* old) {
      return access_.AdmitRbac(caller.user, object, old);
    };
  };
  // Answers a write once the caches it feeds have caught up; when they have not in time, the
  // answer carries a Warning saying so.
  auto settle = [&](http::Response resp) {
    if (!feeds_access) return resp;
    if (auto st = access_.WaitForRevision(storage_.store().Revision()); !st.ok()) {
      AddWarnings(resp, {std::string(st.message())});
    }
    return resp;
  };

  const std::string& method = req.method;
  const bool want_table = WantsTable(req.headers.Get("Accept"));
  const core::SystemTime now = storage_.clock().Now();

  auto object_response = [&](int code, const Json& obj, const std::vector<std::string>& warnings) {
    http::Response resp;
    if (want_table && method == "GET") {
      Json meta = {{"resourceVersion", machinery::ResourceVersion(obj)}};
      resp = JsonResponse(code, ToTable(r, {&obj}, ParseInclude(req), meta, true, now,
                                        TableApiVersion(req.headers.Get("Accept"))));
    } else {
      resp = JsonResponse(code, obj);
    }
    AddWarnings(resp, warnings);
    return resp;
  };

  if (info.verb == "watch") {
    if (method != "GET" || !sub.empty()) return StatusResponse(MethodNotAllowed());
    auto lo = ParseListOptions(req);
    if (!lo.ok()) return StatusResponse(lo.status());
    if (!name.empty()) {
      // The deprecated /watch/.../<name> paths watch one object, as a name field selector
      // (kube-apiserver refuses a selector naming another object).
      if (lo->field_selector.empty()) {
        lo->field_selector = "metadata.name=" + name;
      } else {
        auto selected = machinery::FieldSelector::Parse(lo->field_selector);
        bool names_it = false;
        if (selected.ok()) {
          for (const auto& term : selected->requirements()) {
            names_it |= term.field == "metadata.name" && term.equal && term.value == name;
          }
        }
        if (!names_it) {
          return StatusResponse(
              core::BadRequest("fieldSelector metadata.name doesn't match requested name"));
        }
      }
    }
    auto filter = Filter::Make(r, lo->label_selector, lo->field_selector);
    if (!filter.ok()) return StatusResponse(filter.status());
    WatchRequest wr;
    wr.resource = rp;
    wr.ns = ns;
    wr.filter = *filter;
    wr.resource_version = lo->resource_version;
    wr.resource_version_match = lo->resource_version_match;
    wr.allow_bookmarks = QueryBool(req.Query("allowWatchBookmarks"));
    wr.send_initial_events = QueryBool(req.Query("sendInitialEvents"));
    if (auto t = req.Query("timeoutSeconds")) {
      auto n = core::ParseInt64(*t);
      if (n && *n > 0) wr.timeout = std::chrono::seconds(*n);
    }
    wr.table = want_table;
    wr.table_api_version = TableApiVersion(req.headers.Get("Accept"));
    wr.include = ParseInclude(req);
    auto resp = watches_.Start(std::move(wr));
    if (!resp.ok()) return StatusResponse(resp.status());
    return std::move(resp).value();
  }

  if (method == "GET") {
    if (name.empty()) {
      auto lo = ParseListOptions(req);
      if (!lo.ok()) return StatusResponse(lo.status());
      auto list = storage_.List(r, ns, *lo);
      if (!list.ok()) return StatusResponse(list.status());
      Json meta = {{"resourceVersion", list->resource_version}};
      if (!list->continue_token.empty()) meta["continue"] = list->continue_token;
      if (want_table) {
        std::vector<const Json*> objs;
        objs.reserve(list->items.size());
        for (auto& item : list->items) objs.push_back(&item.Object());
        return JsonResponse(200, ToTable(r, objs, ParseInclude(req), meta, true, now,
                                         TableApiVersion(req.headers.Get("Accept"))));
      }
      // Items are spliced in as stored bytes: no re-encoding for plain lists.
      std::string body;
      size_t total = 0;
      for (auto& item : list->items) total += item.raw->size() + 1;
      body.reserve(total + 256);
      body += R"({"apiVersion":)";
      body += Json(r.ApiVersion()).dump();
      body += R"(,"items":[)";
      for (size_t i = 0; i < list->items.size(); ++i) {
        if (i) body += ',';
        body += *list->items[i].raw;
      }
      body += R"(],"kind":)";
      body += Json(r.list_kind).dump();
      body += R"(,"metadata":)";
      body += meta.dump();
      body += '}';
      return JsonResponse(200, std::move(body));
    }
    if (!want_table) {
      auto raw = storage_.GetRaw(r, ns, name);
      if (!raw.ok()) return StatusResponse(raw.status());
      return JsonResponse(200, **raw);
    }
    auto obj = storage_.Get(r, ns, name);
    if (!obj.ok()) return StatusResponse(obj.status());
    return object_response(200, *obj, {});
  }

  if (method == "POST") {
    if (!name.empty()) {
      return StatusResponse(MethodNotAllowed());
    }
    auto opts = ParseWriteOptions(req, false);
    if (!opts.ok()) return StatusResponse(opts.status());
    guard(*opts);
    auto body = DecodeBody(r, req, opts->duplicate_fields);
    if (!body.ok()) return StatusResponse(body.status());
    if (facts) facts->name = GetString(*body, {"metadata", "name"});
    auto out = storage_.Create(r, ns, std::move(body).value(), *opts);
    if (!out.ok()) return StatusResponse(out.status());
    if (facts) facts->name = machinery::Name(out->object);
    return settle(object_response(201, out->object, out->warnings));
  }

  if (method == "PUT") {
    if (name.empty()) {
      return StatusResponse(MethodNotAllowed());
    }
    auto opts = ParseWriteOptions(req, false);
    if (!opts.ok()) return StatusResponse(opts.status());
    guard(*opts);
    opts->subresource = sub;
    auto body = DecodeBody(r, req, opts->duplicate_fields);
    if (!body.ok()) return StatusResponse(body.status());
    auto out = storage_.Update(r, ns, name, std::move(body).value(), *opts);
    if (!out.ok()) return StatusResponse(out.status());
    return settle(object_response(out->created ? 201 : 200, out->object, out->warnings));
  }

  if (method == "PATCH") {
    if (name.empty()) {
      return StatusResponse(MethodNotAllowed());
    }
    const std::string type = MediaType(req.headers.Get("Content-Type"));
    PatchRequest patch;
    if (type == "application/json-patch+json") {
      patch.type = PatchType::kJson;
    } else if (type == "application/merge-patch+json") {
      patch.type = PatchType::kMerge;
    } else if (type == "application/strategic-merge-patch+json") {
      patch.type = PatchType::kStrategic;
    } else if (type == "application/apply-patch+yaml") {
      patch.type = PatchType::kApply;
    } else {
      return StatusResponse(core::Status(
          core::Reason::kUnsupportedMediaType,
          fmt::format("the body of the request was in an unknown format - accepted media types "
                      "include: application/json-patch+json, application/merge-patch+json, "
                      "application/apply-patch+yaml{}",
                      r.strategic_merge ? ", application/strategic-merge-patch+json" : "")));
    }
    auto opts = ParseWriteOptions(req, patch.type == PatchType::kApply);
    if (!opts.ok()) return StatusResponse(opts.status());
    guard(*opts);
    opts->subresource = sub;
    if (auto f = req.Query("force")) {
      if (*f == "true") {
        patch.force = true;
      } else if (*f != "false") {
        return StatusResponse(core::BadRequest(fmt::format("force: Invalid value: \"{}\"", *f)));
      }
    }
    patch.body = std::move(req.body);
    auto out = storage_.Patch(r, ns, name, patch, *opts);
    if (!out.ok()) return StatusResponse(out.status());
    return settle(object_response(out->created ? 201 : 200, out->object, out->warnings));
  }

  if (method == "DELETE") {
    if (!sub.empty()) {
      return StatusResponse(MethodNotAllowed());
    }
    auto dopts = ParseDeleteOptions(req);
    if (!dopts.ok()) return StatusResponse(dopts.status());
    if (name.empty()) {
      if (std::find(r.verbs.begin(), r.verbs.end(), "deletecollection") == r.verbs.end()) {
        return StatusResponse(MethodNotAllowed());
      }
      auto lo = ParseListOptions(req);
      if (!lo.ok()) return StatusResponse(lo.status());
      auto deleted = storage_.DeleteCollection(r, ns, *lo, *dopts);
      if (!deleted.ok()) return StatusResponse(deleted.status());
      Json items = Json::array();
      for (auto& o : *deleted) items.push_back(std::move(o));
      return settle(JsonResponse(200, Json{{"kind", r.list_kind},
                                           {"apiVersion", r.ApiVersion()},
                                           {"metadata", Json::object()},
                                           {"items", std::move(items)}}));
    }
    auto out = storage_.Delete(r, ns, name, *dopts);
    if (!out.ok()) return StatusResponse(out.status());
    if (out->deleted) {
      core::Details d;
      d.name = std::string(name);
      d.group = r.group;
      d.kind = r.plural;
      d.uid = machinery::Uid(out->object);
      Json status = machinery::StatusToJson(core::Status());
      status["details"] = {{"name", d.name}, {"kind", d.kind}, {"uid", d.uid}};
      if (!d.group.empty()) status["details"]["group"] = d.group;
      return settle(JsonResponse(200, status));
    }
    return settle(JsonResponse(200, out->object));
  }

  return StatusResponse(MethodNotAllowed());
}

}  // namespace klutch::apiserver
