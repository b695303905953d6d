#include "serving/health.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"

namespace klutch::serving {

namespace {
http::Response Text(int code, std::string body) {
  http::Response r;
  r.status = code;
  r.headers.Set("Content-Type", "text/plain; charset=utf-8");
  r.headers.Set("X-Content-Type-Options", "nosniff");
  r.body = std::move(body);
  return r;
}
}  // namespace

HealthChecks::HealthChecks() {
  checks_.push_back({"ping", [] { return core::Status::Ok(); }, true});
}

std::vector<const HealthChecks::Named*> HealthChecks::For(std::string_view endpoint) const {
  const bool liveness_only = endpoint == "livez";
  std::vector<const Named*> out;
  for (const Named& c : checks_) {
    if (!liveness_only || c.liveness) out.push_back(&c);
  }
  // As in kube-apiserver, "shutdown" is the last check of /readyz, and only of /readyz: a
  // draining process is still healthy and alive.
  if (endpoint == "readyz") out.push_back(&shutdown_);
  return out;
}

void HealthChecks::AddLiveness(std::string name, Check check) {
  checks_.push_back({std::move(name), std::move(check), true});
}

void HealthChecks::AddReadiness(std::string name, Check check) {
  checks_.push_back({std::move(name), std::move(check), false});
}

void HealthChecks::AddRoutes(http::Router& router) const {
  for (std::string endpoint : {"healthz", "livez", "readyz"}) {
    router.Get("/" + endpoint, [this, endpoint](http::Request& req, const http::PathParams&) {
      return Serve(req, endpoint, "");
    });
    router.Get("/" + endpoint + "/{check}",
               [this, endpoint](http::Request& req, const http::PathParams& p) {
                 return Serve(req, endpoint, p.Get("check"));
               });
  }
}

http::Response HealthChecks::Serve(const http::Request& req, const std::string& endpoint,
                                   std::string_view only) const {
  std::vector<std::string_view> excluded;
  for (const auto& [k, v] : req.query) {
    if (k == "exclude") excluded.push_back(v);
  }
  const std::vector<const Named*> checks = For(endpoint);
  if (!only.empty()) {
    for (const Named* c : checks) {
      if (c->name != only) continue;
      core::Status st = c->check();
      if (st.ok()) return Text(200, "ok");
      return Text(500, fmt::format("internal server error: {}\n", st.message()));
    }
    return Text(404, "404 page not found\n");
  }
  std::string lines;
  bool failed = false;
  for (const Named* c : checks) {
    if (std::find(excluded.begin(), excluded.end(), c->name) != excluded.end()) {
      lines += fmt::format("[+]{} excluded: ok\n", c->name);
      continue;
    }
    if (c->check().ok()) {
      lines += fmt::format("[+]{} ok\n", c->name);
    } else {
      failed = true;
      lines += fmt::format("[-]{} failed: reason withheld\n", c->name);
    }
  }
  if (failed) return Text(500, lines + endpoint + " check failed\n");
  if (req.Query("verbose")) return Text(200, lines + endpoint + " check passed\n");
  return Text(200, "ok");
}

}  // namespace klutch::serving
