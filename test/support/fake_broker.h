// FakeBroker: a small in-memory Open Service Broker with the a9s extension and the a9s Backup
// Manager API, on loopback, for provider-anynines' tests only (never linked into the product).
//
// It speaks the wire protocol of data-services.md §6.1/§6.5 the way the provider expects a
// broker to: basic auth (401 otherwise), X-Broker-API-Version on /v2 (412 without it),
// asynchronous provision / update / deprovision that finish after `polls_to_finish`
// last_operation polls (or stay in progress while held), bindings with PostgreSQL-shaped
// credentials and a fresh password each, backups and restores that go queued -> running ->
// done over polls (held: they stay running). Tests inject answers (Inject), stop it (Stop:
// connection refused), and read what was asked (requests(), the state accessors). Thread-safe.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "core/status.h"
#include "core/strings.h"
#include "core/sync.h"
#include "http/router.h"
#include "http/server.h"
#include "machinery/json.h"
#include "machinery/merge_patch.h"
#include "machinery/object.h"

namespace klutch::providers::anynines::testing {

using machinery::Json;

class FakeBroker {
 public:
  struct Options {
    std::string username = "broker-user";
    std::string password = "broker-pass";
    std::string prefix = "/postgresql";  // the broker's base path below the host
    bool a9s_extension = true;           // serve GET /instances/{id}
    int polls_to_finish = 1;             // last_operation polls before an operation succeeds
    // Another broker's catalog (null: a9s PostgreSQL and KeyValue, Catalog()), and the
    // credentials it binds with, made from a fresh username and password (empty: a9s
    // PostgreSQL's).
    Json catalog = nullptr;
    std::function<Json(const std::string& username, const std::string& password)> credentials;
  };

  struct Recorded {
    std::string method, path, query, body;
    std::string version, authorization;
  };

  struct Instance {
    std::string service_id, plan_id, state, org, space;
    Json parameters = Json::object();
    std::string operation;  // in flight, "" when none
    std::string op_kind;    // provision, update, deprovision
    Json pending_change;    // update: {"plan_id", "parameters"}
    int polls_left = 0;
  };

  struct Binding {
    std::string instance_id;
    Json credentials;
  };

  struct Job {  // a backup or a restore
    int64_t id = 0;
    int64_t backup_id = 0;
    std::string instance_id, status;
    int polls = 0;
  };

  explicit FakeBroker(Options options) : options_(std::move(options)) {
    Route();
    auto server = http::Server::Start({.threads = 8}, router_.AsHandler());
    if (server.ok()) {
      server_ = std::move(*server);
      port_ = server_->port();
    }
  }
  FakeBroker() : FakeBroker(Options{}) {}
  ~FakeBroker() { Stop(); }

  bool ok() const { return port_ != 0; }
  std::string url() const { return fmt::format("http://127.0.0.1:{}{}", port_, options_.prefix); }
  const Options& options() const { return options_; }

  // Stops serving: later requests find the port closed.
  void Stop() {
    if (server_) server_->Stop();
  }

  // The next `times` requests whose method matches and whose path contains `path_part` get
  // `status` with `body`; with `served`, the request is carried out first and only its answer
  // is replaced (an answer lost on the way).
  void Inject(std::string method, std::string path_part, int status, Json body, int times = 1,
              bool served = false) {
    core::MutexLock lock(mu_);
    injections_.push_back(
        {std::move(method), std::move(path_part), status, std::move(body), times, served});
  }
  // The next asynchronous operation to finish fails with `description`, leaving its instance
  // in state "failed", as a broker whose engine refused to start does.
  void FailNextOperation(std::string description) {
    core::MutexLock lock(mu_);
    fail_next_ = std::move(description);
  }
  void ClearInjections() {
    core::MutexLock lock(mu_);
    injections_.clear();
  }
  // While held, operations, backups and restores stay in progress.
  void Hold(bool hold) {
    core::MutexLock lock(mu_);
    hold_ = hold;
  }

  std::vector<Recorded> requests() const {
    core::MutexLock lock(mu_);
    return requests_;
  }
  std::vector<Recorded> requests(const std::string& method, const std::string& path_part) const {
    std::vector<Recorded> out;
    for (const Recorded& r : requests()) {
      if (r.method == method && r.path.find(path_part) != std::string::npos) out.push_back(r);
    }
    return out;
  }
  std::map<std::string, Instance> instances() const {
    core::MutexLock lock(mu_);
    return instances_;
  }
  std::map<std::string, Binding> bindings() const {
    core::MutexLock lock(mu_);
    return bindings_;
  }
  std::map<int64_t, Job> backups() const {
    core::MutexLock lock(mu_);
    return backups_;
  }
  std::map<int64_t, Job> restores() const {
    core::MutexLock lock(mu_);
    return restores_;
  }

  static Json Catalog() {
    auto plan = [](const char* id, const char* name) {
      return Json{{"id", id}, {"name", name}, {"free", true}};
    };
    return {
        {"services",
         Json::array({{{"id", "svc-pg"},
                       {"name", "a9s-postgresql15-ms-1687789907"},
                       {"bindable", true},
                       {"plan_updateable", true},
                       {"plans", Json::array({plan("plan-nano", "postgresql-single-nano"),
                                              plan("plan-small", "postgresql-single-small"),
                                              plan("plan-replica", "postgresql-replica-small")})}},
                      {{"id", "svc-kv"},
                       {"name", "a9s-keyvalue8"},
                       {"bindable", true},
                       {"plan_updateable", true},
                       {"plans", Json::array({plan("plan-kv-nano", "keyvalue-single-nano")})}}})}};
  }

 private:
  struct Injection {
    std::string method, path_part;
    int status;
    Json body;
    int times;
    bool served;
  };

  static http::Response Answer(int status, const Json& body) {
    http::Response r;
    r.status = status;
    r.headers.Set("Content-Type", "application/json");
    r.body = machinery::Dump(body);
    return r;
  }
  static http::Response Error(int status, std::string error, std::string description) {
    Json body = Json::object();
    if (!error.empty()) body["error"] = error;
    if (!description.empty()) body["description"] = description;
    return Answer(status, body);
  }
  static http::Response NotFound() {
    return Error(404, "InstanceNotFound", "the instance does not exist");
  }

  // Auth, version, recording and injected answers, then `fn`.
  http::RouteHandler Wrap(
      bool osb, std::function<http::Response(http::Request&, const http::PathParams&)> fn) {
    return [this, osb, fn](http::Request& r, const http::PathParams& p) -> http::Response {
      std::string query;
      auto q = r.target.find('?');
      if (q != std::string::npos) query = r.target.substr(q + 1);
      std::optional<http::Response> replacement;
      {
        core::MutexLock lock(mu_);
        requests_.push_back({r.method, r.path, query, r.body,
                             std::string(r.headers.Get("X-Broker-API-Version")),
                             std::string(r.headers.Get("Authorization"))});
        for (auto it = injections_.begin(); it != injections_.end(); ++it) {
          if (it->method == r.method && r.path.find(it->path_part) != std::string::npos) {
            replacement = Answer(it->status, it->body);
            bool served = it->served;
            if (--it->times <= 0) injections_.erase(it);
            if (!served) return *replacement;
            break;
          }
        }
      }
      if (replacement) {
        (void)fn(r, p);
        return *replacement;
      }
      std::string want = "Basic " + core::Base64Encode(options_.username + ":" + options_.password);
      if (r.headers.Get("Authorization") != want) return Error(401, "", "");
      if (osb && r.path.find("/v2/") != std::string::npos &&
          r.headers.Get("X-Broker-API-Version").empty()) {
        return Error(412, "", "X-Broker-API-Version is required");
      }
      return fn(r, p);
    };
  }

  static Json Body(const http::Request& r) {
    auto b = machinery::ParseJson(r.body);
    return b.ok() ? *b : Json::object();
  }

  const Json& catalog() const {
    static const Json kDefault = Catalog();
    return options_.catalog.is_null() ? kDefault : options_.catalog;
  }

  std::string PlanOf(const std::string& plan_id) const {
    for (const Json& service : catalog()["services"]) {
      for (const Json& plan : service["plans"]) {
        if (machinery::GetString(plan, {"id"}) == plan_id) return plan_id;
      }
    }
    return "";
  }

  // One last_operation poll of `id`'s operation: finishes it after polls_to_finish polls.
  Json Poll(const std::string& id) REQUIRES(mu_) {
    Instance& inst = instances_[id];
    if (inst.operation.empty()) return {{"state", "succeeded"}};
    if (hold_ || --inst.polls_left > 0) {
      return {{"state", "in progress"}, {"description", inst.op_kind + " is running"}};
    }
    std::string kind = inst.op_kind;
    inst.operation.clear();
    if (fail_next_) {
      std::string why = *std::exchange(fail_next_, std::nullopt);
      inst.state = "failed";
      return {{"state", "failed"}, {"description", why}};
    }
    if (kind == "provision") {
      inst.state = "provisioned";
    } else if (kind == "update") {
      inst.plan_id = machinery::GetString(inst.pending_change, {"plan_id"});
      const Json* params = machinery::Find(inst.pending_change, {"parameters"});
      if (params && params->is_object()) {
        inst.parameters = machinery::ApplyMergePatch(inst.parameters, *params);
      }
      inst.state = "provisioned";
    } else if (kind == "deprovision") {
      instances_.erase(id);
    }
    return {{"state", "succeeded"}, {"description", kind + " done"}};
  }

  std::string Start(Instance& inst, std::string kind) REQUIRES(mu_) {
    inst.operation = fmt::format("{}-{}", kind, ++ops_);
    inst.op_kind = std::move(kind);
    inst.polls_left = options_.polls_to_finish;
    return inst.operation;
  }

  // One poll of a backup or restore: queued -> running -> done; held jobs stop at running.
  void Advance(Job& job) REQUIRES(mu_) {
    if (job.status != "queued" && job.status != "running") return;
    if (hold_) {
      job.status = "running";
      return;
    }
    ++job.polls;
    job.status = job.polls >= 2 ? "done" : "running";
  }

  void Route() {
    const std::string& base = options_.prefix;
    router_.Get(base + "/v2/catalog", Wrap(true, [this](http::Request&, const http::PathParams&) {
                  return Answer(200, catalog());
                }));
    router_.Put(base + "/v2/service_instances/{id}",
                Wrap(true, [this](http::Request& r, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  std::string id(p.Get("id"));
                  Json b = Body(r);
                  std::string plan = PlanOf(machinery::GetString(b, {"plan_id"}));
                  if (plan.empty()) return Error(400, "", "unknown plan");
                  auto it = instances_.find(id);
                  if (it != instances_.end()) {
                    if (it->second.plan_id != plan) {
                      return Error(409, "", "exists with another plan");
                    }
                    return it->second.operation.empty()
                               ? Answer(200, Json::object())
                               : Answer(202, {{"operation", it->second.operation}});
                  }
                  if (r.Query("accepts_incomplete") != "true") {
                    return Error(422, "AsyncRequired", "async only");
                  }
                  Instance& inst = instances_[id];
                  inst.service_id = machinery::GetString(b, {"service_id"});
                  inst.plan_id = plan;
                  inst.org = machinery::GetString(b, {"organization_guid"});
                  inst.space = machinery::GetString(b, {"space_guid"});
                  if (const Json* params = machinery::Find(b, {"parameters"})) {
                    inst.parameters = *params;
                  }
                  inst.state = "created";
                  return Answer(202, {{"operation", Start(inst, "provision")}});
                }));
    router_.Patch(base + "/v2/service_instances/{id}",
                  Wrap(true, [this](http::Request& r, const http::PathParams& p) {
                    core::MutexLock lock(mu_);
                    auto it = instances_.find(std::string(p.Get("id")));
                    if (it == instances_.end()) return NotFound();
                    Json b = Body(r);
                    if (PlanOf(machinery::GetString(b, {"plan_id"})).empty()) {
                      return Error(400, "", "unknown plan");
                    }
                    it->second.pending_change = b;
                    it->second.state = "deploying";
                    return Answer(202, {{"operation", Start(it->second, "update")}});
                  }));
    router_.Delete(base + "/v2/service_instances/{id}",
                   Wrap(true, [this](http::Request& r, const http::PathParams& p) {
                     core::MutexLock lock(mu_);
                     auto it = instances_.find(std::string(p.Get("id")));
                     if (it == instances_.end()) return Error(410, "", "");
                     it->second.state = "deleting";
                     return Answer(202, {{"operation", Start(it->second, "deprovision")}});
                   }));
    router_.Get(base + "/v2/service_instances/{id}",
                Wrap(true, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  auto it = instances_.find(std::string(p.Get("id")));
                  if (it == instances_.end()) return NotFound();
                  return Answer(200, {{"service_id", it->second.service_id},
                                      {"plan_id", it->second.plan_id},
                                      {"parameters", it->second.parameters}});
                }));
    router_.Get(base + "/v2/service_instances/{id}/last_operation",
                Wrap(true, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  std::string id(p.Get("id"));
                  if (!instances_.count(id)) return Error(410, "", "");
                  return Answer(200, Poll(id));
                }));
    router_.Put(base + "/v2/service_instances/{id}/service_bindings/{bid}",
                Wrap(true, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  std::string id(p.Get("id")), bid(p.Get("bid"));
                  auto it = instances_.find(id);
                  if (it == instances_.end()) return NotFound();
                  if (it->second.state != "provisioned") {
                    return Error(422, "ConcurrencyError", "Instance is not provisioned currently.");
                  }
                  auto b = bindings_.find(bid);
                  if (b != bindings_.end()) {
                    return Answer(200, {{"credentials", b->second.credentials}});
                  }
                  std::string password = core::RandomSuffix(16);
                  std::string user = "u" + core::RandomSuffix(8);
                  Json creds = options_.credentials ? options_.credentials(user, password) : Json();
                  if (creds.is_null()) {
                    creds = {{"host", "pg.example.internal"},
                             {"hosts", Json::array({"pg.example.internal"})},
                             {"name", "db"},
                             {"password", password},
                             {"port", 5432},
                             {"uri", fmt::format("postgres://{}:{}@pg.example.internal:"
                                                 "5432/db",
                                                 user, password)},
                             {"username", user}};
                  }
                  bindings_[bid] = {id, creds};
                  return Answer(201, {{"credentials", creds}});
                }));
    router_.Get(base + "/v2/service_instances/{id}/service_bindings/{bid}",
                Wrap(true, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  auto b = bindings_.find(std::string(p.Get("bid")));
                  if (b == bindings_.end()) return Error(404, "", "");
                  return Answer(200, {{"credentials", b->second.credentials}});
                }));
    router_.Delete(base + "/v2/service_instances/{id}/service_bindings/{bid}",
                   Wrap(true, [this](http::Request&, const http::PathParams& p) {
                     core::MutexLock lock(mu_);
                     if (bindings_.erase(std::string(p.Get("bid"))) == 0) {
                       return Answer(410, Json::object());
                     }
                     return Answer(200, Json::object());
                   }));
    router_.Get(base + "/instances", Wrap(false, [](http::Request&, const http::PathParams&) {
                  return Answer(200, {{"resources", Json::array()}});
                }));
    if (options_.a9s_extension) {
      router_.Get(base + "/instances/{id}",
                  Wrap(false, [this](http::Request&, const http::PathParams& p) {
                    core::MutexLock lock(mu_);
                    std::string id(p.Get("id"));
                    auto it = instances_.find(id);
                    if (it == instances_.end()) return NotFound();
                    const Instance& i = it->second;
                    return Answer(200, {{"id", 1},
                                        {"plan_guid", i.plan_id},
                                        {"service_guid", i.service_id},
                                        {"state", i.state},
                                        {"guid_at_tenant", id},
                                        {"context",
                                         {{"organization_guid", i.org},
                                          {"space_guid", i.space},
                                          {"parameters", i.parameters}}},
                                        {"created_at", "2024-05-01T10:00:00.000Z"},
                                        {"updated_at", "2024-05-01T10:00:00.000Z"}});
                  }));
    }
    // The backup manager.
    router_.Post(base + "/instances/{id}/backups",
                 Wrap(false, [this](http::Request&, const http::PathParams& p) {
                   core::MutexLock lock(mu_);
                   std::string id(p.Get("id"));
                   if (!instances_.count(id)) return NotFound();
                   Job& job = backups_[++jobs_];
                   job = {.id = jobs_, .instance_id = id, .status = "queued"};
                   return Answer(201, {{"id", job.id}, {"message", "queued"}});
                 }));
    router_.Get(base + "/instances/{id}/backups",
                Wrap(false, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  Json out = Json::array();
                  for (const auto& [id, j] : backups_) {
                    if (j.instance_id == p.Get("id"))
                      out.push_back({{"id", id}, {"status", j.status}});
                  }
                  return Answer(200, out);
                }));
    router_.Get(base + "/instances/{id}/restores",
                Wrap(false, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  Json out = Json::array();
                  for (const auto& [id, j] : restores_) {
                    if (j.instance_id == p.Get("id")) {
                      out.push_back({{"id", id}, {"backup_id", j.backup_id}, {"status", j.status}});
                    }
                  }
                  return Answer(200, out);
                }));
    router_.Get(base + "/instances/{id}/backups/{bid:int}",
                Wrap(false, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  auto it = backups_.find(p.Int("bid").value_or(-1));
                  if (it == backups_.end()) return Error(404, "", "no backup");
                  Advance(it->second);
                  const Job& j = it->second;
                  Json b = {{"id", j.id},
                            {"size", j.status == "done" ? 4096 : 0},
                            {"status", j.status},
                            {"triggered_at", "2024-05-01T10:00:00.000Z"},
                            {"downloadable", false}};
                  if (j.status == "done") {
                    b["finished_at"] = "2024-05-01T10:00:01.000Z";
                  }
                  return Answer(200, b);
                }));
    router_.Delete(base + "/instances/{id}/backups/{bid:int}",
                   Wrap(false, [this](http::Request&, const http::PathParams& p) {
                     core::MutexLock lock(mu_);
                     int64_t bid = p.Int("bid").value_or(-1);
                     auto it = backups_.find(bid);
                     if (it == backups_.end()) return Error(404, "", "no backup");
                     for (const auto& [rid, r] : restores_) {
                       if (r.backup_id == bid && (r.status == "queued" || r.status == "running")) {
                         return Error(423, "", "The backup is being restored.");
                       }
                     }
                     it->second.status = "deleted";
                     return Answer(200, {{"message", "deleted"}});
                   }));
    router_.Post(base + "/instances/{id}/backups/{bid:int}/restore",
                 Wrap(false, [this](http::Request&, const http::PathParams& p) {
                   core::MutexLock lock(mu_);
                   int64_t bid = p.Int("bid").value_or(-1);
                   auto it = backups_.find(bid);
                   if (it == backups_.end()) return Error(404, "", "no backup");
                   if (it->second.status != "done") {
                     return Error(422, "", "The backup is not restorable.");
                   }
                   Job& job = restores_[++jobs_];
                   job = {.id = jobs_,
                          .backup_id = bid,
                          .instance_id = std::string(p.Get("id")),
                          .status = "queued"};
                   return Answer(202, {{"id", job.id}});
                 }));
    router_.Get(base + "/instances/{id}/restores/{rid:int}",
                Wrap(false, [this](http::Request&, const http::PathParams& p) {
                  core::MutexLock lock(mu_);
                  auto it = restores_.find(p.Int("rid").value_or(-1));
                  if (it == restores_.end()) return Error(404, "", "no restore");
                  Advance(it->second);
                  const Job& j = it->second;
                  return Answer(200, {{"id", j.id},
                                      {"backup_id", j.backup_id},
                                      {"status", j.status},
                                      {"triggered_at", "2024-05-01T10:00:02.000Z"}});
                }));
  }

  const Options options_;
  http::Router router_;
  std::unique_ptr<http::Server> server_;
  uint16_t port_ = 0;
  mutable core::Mutex mu_;
  std::vector<Recorded> requests_ GUARDED_BY(mu_);
  std::deque<Injection> injections_ GUARDED_BY(mu_);
  std::optional<std::string> fail_next_ GUARDED_BY(mu_);
  std::map<std::string, Instance> instances_ GUARDED_BY(mu_);
  std::map<std::string, Binding> bindings_ GUARDED_BY(mu_);
  std::map<int64_t, Job> backups_ GUARDED_BY(mu_);
  std::map<int64_t, Job> restores_ GUARDED_BY(mu_);
  int64_t jobs_ GUARDED_BY(mu_) = 0;
  int ops_ GUARDED_BY(mu_) = 0;
  bool hold_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::providers::anynines::testing
