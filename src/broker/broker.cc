#include "broker/broker.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <openssl/sha.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <system_error>
#include <thread>

#include "broker/crypto.h"
#include "broker/osb.h"
#include "broker/supervisor.h"
#include "core/file.h"
#include "core/log.h"
#include "core/net.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/sync.h"
#include "http/certs.h"
#include "http/router.h"
#include "machinery/object.h"
#include "serving/endpoints.h"
#include "serving/json_response.h"
#include "serving/metrics.h"

namespace klutch::broker {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

constexpr char kBackupManagerSuffix[] = "-backup-manager";

using serving::JsonResponse;

http::Response Error(const OsbError& e) { return JsonResponse(e.status, ErrorBody(e)); }
http::Response Error(int status, std::string error, std::string description) {
  return Error(OsbError{status, std::move(error), std::move(description)});
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string ServiceList(std::string_view type) {
  std::vector<std::string> names;
  for (const Service* s : ServicesOfType(type))
    names.push_back(fmt::format("{} (id {})", s->name, s->id));
  return core::Join(names, ", ");
}

std::string PlanList(const Service& s) {
  std::vector<std::string> names;
  for (const auto& p : s.plans) names.push_back(p.name);
  return core::Join(names, ", ");
}

// Merges an update's parameters: null removes a key, other values replace.
Json MergeParameters(const Json& current, const Json& update) {
  Json out = current.is_object() ? current : Json::object();
  for (const auto& [k, v] : update.items()) {
    if (v.is_null())
      out.erase(k);
    else
      out[k] = v;
  }
  return out;
}

enum class OpKind { kProvision, kUpdate, kDeprovision, kStart, kBackup, kRestore };

const char* OpName(OpKind k) {
  switch (k) {
    case OpKind::kProvision:
      return "provision";
    case OpKind::kUpdate:
      return "update";
    case OpKind::kDeprovision:
      return "deprovision";
    case OpKind::kStart:
      return "start";
    case OpKind::kBackup:
      return "backup";
    case OpKind::kRestore:
      return "restore";
  }
  return "unknown";
}

struct Op {
  OpKind kind;
  int64_t id = 0;  // backup or restore id
};

struct Entry {
  core::Mutex mu;
  InstanceRecord record GUARDED_BY(mu);
  std::deque<Op> pending GUARDED_BY(mu);
  bool running GUARDED_BY(mu) = false;
  bool degraded GUARDED_BY(mu) = false;  // a node is down (the supervisor restarts it)
  std::string degraded_detail GUARDED_BY(mu);
  SteadyClock::time_point recovered_at GUARDED_BY(mu){};  // when the last outage ended
  bool removed GUARDED_BY(mu) = false;
  // Serialises engine calls on this instance (operations, binds, unbinds).
  core::Mutex engine_mu;
};

}  // namespace

class Broker::Impl {
 public:
  explicit Impl(BrokerOptions options)
      : options_(std::move(options)),
        state_(options_.state_dir),
        supervisor_([this](const std::string& id, int node, bool up, const std::string& detail) {
          OnNodeChange(id, node, up, detail);
        }) {}

  ~Impl() { Shutdown(); }

  core::Status Init() {
    KLUTCH_RETURN_IF_ERROR(state_.Init());
    KLUTCH_RETURN_IF_ERROR(LoadOrCreateCa());
    KLUTCH_RETURN_IF_ERROR(LoadOrCreateCredentials());
    options_.engine.state = state_;
    engines_[Engine::kPostgresql] = NewPostgresService(options_.engine);
    engines_[Engine::kRedis] = NewRedisService(options_.engine);
    RegisterMetrics();
    BuildRouter();

    // Unencrypted dumps a crashed backup or restore left behind: the operation runs again.
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(state_.root() / "backups", ec);
         !ec && it != fs::end(it); it.increment(ec)) {
      if (it->path().extension() == ".plain") fs::remove(it->path(), ec);
    }
    {
      int64_t highest = state_.CleanUp();
      core::MutexLock lock(mu_);
      next_number_ = std::max(next_number_, highest + 1);
    }
    std::vector<std::string> errors;
    for (auto& record : state_.LoadAll(&errors)) {
      auto entry = std::make_shared<Entry>();
      Op resume{OpKind::kStart};
      bool resume_op = true;
      // Servers that outlived the last broker are adopted (kStart) before an interrupted
      // update or deprovision runs again, so that it stops and restarts the real processes.
      std::vector<Op> resume_ops;
      if (record.state == kStateDeploying && record.operation == "provision") {
        resume_ops = {Op{OpKind::kProvision}};
      } else if (record.state == kStateDeploying) {
        resume_ops = {Op{OpKind::kStart}, Op{OpKind::kUpdate}};
      } else if (record.state == kStateDeleting) {
        resume_ops = {Op{OpKind::kStart}, Op{OpKind::kDeprovision}};
      } else if (!record.ports.empty()) {
        resume_ops = {Op{OpKind::kStart}};
      }
      (void)resume;
      (void)resume_op;
      {
        core::MutexLock lock(entry->mu);
        for (const Op& op : resume_ops) entry->pending.push_back(op);
        for (const auto& b : record.backups) {
          if (b.status == "queued" || b.status == "running") {
            entry->pending.push_back(Op{OpKind::kBackup, b.id});
          }
        }
        for (const auto& r : record.restores) {
          if (r.status == "queued" || r.status == "running") {
            entry->pending.push_back(Op{OpKind::kRestore, r.id});
          }
        }
        {
          core::MutexLock plock(ports_mu_);
          for (int p : record.ports) used_ports_.insert(p);
        }
        core::MutexLock glock(mu_);
        next_number_ = std::max(next_number_, record.number + 1);
        entry->record = std::move(record);
      }
      core::MutexLock lock(mu_);
      std::string id;
      {
        core::MutexLock entry_lock(entry->mu);
        id = entry->record.id;
        if (!entry->pending.empty()) {
          entry->running = true;
          ready_.push_back(id);
        }
      }
      instances_[id] = entry;
    }
    for (const auto& e : errors) KLUTCH_LOG(kError, "broker", "state: {}", e);
    for (int i = 0; i < std::max(1, options_.workers); ++i) {
      workers_.emplace_back([this] { Work(); });
    }
    quota_thread_ = std::thread([this] { QuotaLoop(); });
    return core::Status::Ok();
  }

  void Shutdown() {
    {
      core::MutexLock lock(mu_);
      if (shut_down_) return;
      shut_down_ = true;
    }
    cv_.SignalAll();
    quota_cv_.SignalAll();
    for (auto& w : workers_) w.join();
    workers_.clear();
    if (quota_thread_.joinable()) quota_thread_.join();
    if (options_.stop_instances_on_shutdown) supervisor_.StopAll();
  }

  http::Response Serve(http::Request& request) {
    if (request.path == "/healthz") return router_.Serve(request);
    if (request.path == "/metrics") {
      // Instance counts by service and state are the operator's: any of the broker's
      // credentials may read them.
      for (const auto& [base, c] : credentials_) {
        if (Authorized(request, c)) return router_.Serve(request);
      }
      http::Response r = Error(
          401, "Unauthorized",
          "/metrics needs basic-auth credentials: any of the broker's (see credentials.json)");
      r.headers.Set("WWW-Authenticate", "Basic realm=\"klutch-broker\"");
      return r;
    }
    auto segments = core::SplitNonEmpty(request.path, '/');
    if (segments.empty()) return Error(404, "NotFound", "no such path; see /<type>/v2/catalog");
    std::string base(segments[0]);
    auto creds = credentials_.find(base);
    if (creds == credentials_.end()) {
      return Error(404, "NotFound",
                   fmt::format("no service type {} here; this broker serves {}",
                               core::GoQuote(base), core::Join(BaseList(), ", ")));
    }
    if (!Authorized(request, creds->second)) {
      http::Response r =
          Error(401, "Unauthorized", "missing or wrong basic-auth credentials for " + base);
      r.headers.Set("WWW-Authenticate", fmt::format("Basic realm=\"klutch-broker/{}\"", base));
      return r;
    }
    bool osb = segments.size() > 1 && segments[1] == "v2" && !base.ends_with(kBackupManagerSuffix);
    if (osb) {
      if (auto e = CheckApiVersion(request.headers.Get("X-Broker-API-Version"))) return Error(*e);
    }
    return router_.Serve(request);
  }

  std::vector<std::string> BaseList() const {
    std::vector<std::string> out;
    for (const auto& [base, c] : credentials_) out.push_back(base);
    return out;
  }

  BasicCredentials Credentials(std::string_view base) const {
    auto it = credentials_.find(std::string(base));
    return it == credentials_.end() ? BasicCredentials{} : it->second;
  }
  std::string CaPem() const { return options_.engine.ca_pem; }

 private:
  // --- setup -----------------------------------------------------------------------------

  core::Status LoadOrCreateCa() {
    fs::path crt = state_.TlsDir() / "ca.crt";
    fs::path key = state_.TlsDir() / "ca.key";
    auto c = core::ReadFile(crt);
    auto k = core::ReadFile(key);
    if (c.ok() && k.ok()) {
      options_.engine.ca_pem = *c;
      options_.engine.ca_key_pem = *k;
      return core::Status::Ok();
    }
    KLUTCH_ASSIGN_OR_RETURN(http::Pem ca, http::GenerateCertificateAuthority(
                                              "klutch-broker-ca", std::chrono::hours(24 * 3650)));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(key, ca.private_key));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(crt, ca.certificate,
                                                 fs::perms::owner_read | fs::perms::owner_write |
                                                     fs::perms::group_read |
                                                     fs::perms::others_read));
    options_.engine.ca_pem = ca.certificate;
    options_.engine.ca_key_pem = ca.private_key;
    return core::Status::Ok();
  }

  core::Status LoadOrCreateCredentials() {
    fs::path file = state_.root() / "credentials.json";
    Json stored = Json::object();
    if (auto text = core::ReadFile(file); text.ok()) {
      auto json = machinery::ParseJson(*text);
      if (json.ok() && json->is_object()) stored = *json;
    }
    bool changed = false;
    for (const Service& s : Services()) {
      for (const std::string& base : {s.type, s.type + kBackupManagerSuffix}) {
        BasicCredentials c{machinery::GetString(stored, {base, "username"}),
                           machinery::GetString(stored, {base, "password"})};
        if (c.username.empty() || c.password.empty()) {
          c = {fmt::format("{}-{}", base, core::RandomSuffix(5)), core::RandomPassword(32)};
          stored[base] = {{"username", c.username}, {"password", c.password}};
          changed = true;
        }
        credentials_[base] = c;
      }
    }
    if (changed) KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(file, machinery::Dump(stored)));
    return core::Status::Ok();
  }

  static bool Authorized(const http::Request& request, const BasicCredentials& want) {
    std::string_view header = request.headers.Get("Authorization");
    if (!header.starts_with("Basic ")) return false;
    auto decoded = core::Base64Decode(core::Trim(header.substr(6)));
    if (!decoded) return false;
    auto colon = decoded->find(':');
    if (colon == std::string::npos) return false;
    bool user_ok = ConstantTimeEquals(std::string_view(*decoded).substr(0, colon), want.username);
    bool pass_ok = ConstantTimeEquals(std::string_view(*decoded).substr(colon + 1), want.password);
    return user_ok && pass_ok;
  }

  void RegisterMetrics() {
    instances_gauge_ = &metrics_.Gauge("klutch_broker_instances",
                                       "Instances by service and state (failed includes "
                                       "instances with a node being restarted)");
    op_duration_ = &metrics_.Histogram("klutch_broker_operation_duration_seconds",
                                       "Duration of asynchronous operations by kind and result",
                                       serving::ExponentialBuckets(0.05, 2, 14));
    bind_duration_ =
        &metrics_.Histogram("klutch_broker_bind_duration_seconds", "Duration of binds and unbinds",
                            serving::ExponentialBuckets(0.005, 2, 12));
    nodes_gauge_ = &metrics_.Gauge("klutch_broker_nodes", "Server processes by state");
    restarts_gauge_ =
        &metrics_.Gauge("klutch_broker_node_restarts",
                        "Restarts of crashed server processes since the broker started");
    metrics_.OnScrape([this] {
      std::map<std::pair<std::string, std::string>, int> counts;
      for (const Service& s : Services()) {
        for (const char* st : {kStateDeploying, kStateProvisioned, kStateFailed, kStateDeleting}) {
          counts[{s.name, st}] = 0;
        }
      }
      for (auto& entry : Entries()) {
        core::MutexLock lock(entry->mu);
        const Service* s = FindService(entry->record.service_id);
        if (s == nullptr || entry->removed) continue;
        counts[{s->name, ReportedState(*entry)}]++;
      }
      for (const auto& [key, n] : counts) {
        instances_gauge_->Set({{"service", key.first}, {"state", key.second}}, n);
      }
      NodeCounts nc = supervisor_.Counts();
      nodes_gauge_->Set({{"state", "up"}}, nc.up);
      nodes_gauge_->Set({{"state", "starting"}}, nc.starting);
      nodes_gauge_->Set({{"state", "down"}}, nc.down);
      restarts_gauge_->Set({}, static_cast<double>(nc.restarts));
    });
  }

  void BuildRouter() {
    serving::AddMetricsRoute(router_, metrics_);
    router_.Get("/healthz", [](http::Request&, const http::PathParams&) {
      return JsonResponse(200, {{"status", "ok"}});
    });
    auto osb = [this](auto fn) {
      return [this, fn](http::Request& r, const http::PathParams& p) -> http::Response {
        std::string base(p.Get("base"));
        if (base.ends_with(kBackupManagerSuffix)) return NotHere(r);
        if (auto e = CheckPathIds(p)) return Error(*e);
        return (this->*fn)(r, p, base);
      };
    };
    auto bm = [this](auto fn) {
      return [this, fn](http::Request& r, const http::PathParams& p) -> http::Response {
        std::string base(p.Get("base"));
        if (!base.ends_with(kBackupManagerSuffix)) return NotHere(r);
        if (auto e = CheckPathIds(p)) return Error(*e);
        return (this->*fn)(r, p, base.substr(0, base.size() - std::strlen(kBackupManagerSuffix)));
      };
    };
    router_.Get("/{base}/v2/catalog", osb(&Impl::Catalog));
    router_.Put("/{base}/v2/service_instances/{instance}", osb(&Impl::Provision));
    router_.Patch("/{base}/v2/service_instances/{instance}", osb(&Impl::Update));
    router_.Delete("/{base}/v2/service_instances/{instance}", osb(&Impl::Deprovision));
    router_.Get("/{base}/v2/service_instances/{instance}", osb(&Impl::GetInstance));
    router_.Get("/{base}/v2/service_instances/{instance}/last_operation",
                osb(&Impl::LastOperation));
    router_.Put("/{base}/v2/service_instances/{instance}/service_bindings/{binding}",
                osb(&Impl::Bind));
    router_.Get("/{base}/v2/service_instances/{instance}/service_bindings/{binding}",
                osb(&Impl::GetBinding));
    router_.Delete("/{base}/v2/service_instances/{instance}/service_bindings/{binding}",
                   osb(&Impl::Unbind));
    router_.Get("/{base}/v2/service_instances/{instance}/service_bindings/{binding}/last_operation",
                osb(&Impl::BindingLastOperation));
    router_.Get("/{base}/osb_ext/v1/healthy", osb(&Impl::Healthy));
    router_.Get("/{base}/instances", [this](http::Request& r, const http::PathParams& p) {
      std::string base(p.Get("base"));
      if (base.ends_with(kBackupManagerSuffix)) {
        return ListInstances(r, p, base.substr(0, base.size() - std::strlen(kBackupManagerSuffix)));
      }
      return ListInstances(r, p, base);
    });
    router_.Get("/{base}/instances/{instance}", osb(&Impl::InstanceDocument));
    router_.Get("/{base}/v2/healthy", bm(&Impl::Healthy));
    router_.Post("/{base}/instances/{instance}/backups", bm(&Impl::CreateBackup));
    router_.Get("/{base}/instances/{instance}/backups", bm(&Impl::ListBackups));
    router_.Get("/{base}/instances/{instance}/backups/{backup}", bm(&Impl::GetBackup));
    router_.Delete("/{base}/instances/{instance}/backups/{backup}", bm(&Impl::DeleteBackup));
    router_.Post("/{base}/instances/{instance}/backups/{backup}/restore", bm(&Impl::CreateRestore));
    router_.Get("/{base}/instances/{instance}/restores", bm(&Impl::ListRestores));
    router_.Get("/{base}/instances/{instance}/restores/{restore}", bm(&Impl::GetRestore));
    router_.Get("/{base}/instances/{instance}/config", bm(&Impl::GetConfig));
    router_.Put("/{base}/instances/{instance}", bm(&Impl::PutConfig));
  }

  // The instance and binding IDs of a route, checked on every route that has them (the
  // router has percent-decoded them, so "%2e%2E" arrives as "..").
  static std::optional<OsbError> CheckPathIds(const http::PathParams& p) {
    if (p.Has("instance")) {
      if (auto e = CheckId("instance_id", p.Get("instance"))) return e;
    }
    if (p.Has("binding")) {
      if (auto e = CheckId("binding_id", p.Get("binding"))) return e;
    }
    return std::nullopt;
  }

  static http::Response NotHere(const http::Request& r) {
    return Error(404, "NotFound",
                 fmt::format("{} {} is not served at this base path", r.method, r.path));
  }

  // --- lookups ---------------------------------------------------------------------------

  std::vector<std::shared_ptr<Entry>> Entries() {
    core::MutexLock lock(mu_);
    std::vector<std::shared_ptr<Entry>> out;
    for (auto& [id, e] : instances_) out.push_back(e);
    return out;
  }

  // The instance `id` when it exists and belongs to a service of `type`.
  std::shared_ptr<Entry> Find(std::string_view id, std::string_view type) {
    std::shared_ptr<Entry> entry;
    {
      core::MutexLock lock(mu_);
      auto it = instances_.find(std::string(id));
      if (it == instances_.end()) return nullptr;
      entry = it->second;
    }
    core::MutexLock lock(entry->mu);
    const Service* s = FindService(entry->record.service_id);
    if (entry->removed || s == nullptr || s->type != type) return nullptr;
    return entry;
  }

  std::string ReportedState(const Entry& e) REQUIRES(e.mu) {
    if (e.record.state == kStateProvisioned &&
        (e.degraded || SteadyClock::now() - e.recovered_at < options_.recovery_hold)) {
      return kStateFailed;
    }
    return e.record.state;
  }

  static http::Response InstanceNotFound(std::string_view id) {
    return Error(404, "InstanceNotFound", fmt::format("instance {} does not exist", id));
  }

  DataService& EngineFor(const Service& s) { return *engines_.find(s.engine)->second; }

  // --- OSB -------------------------------------------------------------------------------

  http::Response Catalog(http::Request&, const http::PathParams&, const std::string& type) {
    return JsonResponse(200, CatalogJson(type));
  }

  http::Response Healthy(http::Request&, const http::PathParams&, const std::string&) {
    return JsonResponse(200, {{"message", "healthy"}});
  }

  http::Response Provision(http::Request& r, const http::PathParams& p, const std::string& type) {
    std::string id(p.Get("instance"));
    if (auto e = CheckId("instance_id", id)) return Error(*e);
    if (auto e = RequireAsync(r.Query("accepts_incomplete"))) return Error(*e);
    ProvisionRequest req;
    if (auto e = ParseProvision(r.body, &req)) return Error(*e);
    const Service* service = FindService(req.service_id);
    if (service == nullptr || service->type != type) {
      return Error(400, "",
                   fmt::format("service_id {} is not offered here; this broker runs {}",
                               core::GoQuote(req.service_id), ServiceList(type)));
    }
    const Plan* plan = FindPlan(*service, req.plan_id);
    if (plan == nullptr) {
      return Error(400, "",
                   fmt::format("plan_id {} is not a plan of {}; its plans are {}",
                               core::GoQuote(req.plan_id), service->name, PlanList(*service)));
    }
    if (auto st = EngineFor(*service).ValidateParameters(req.parameters); !st.ok()) {
      return Error(400, "", st.message());
    }
    std::shared_ptr<Entry> entry;
    std::string operation;
    std::shared_ptr<Entry> retry;
    std::string retry_key;
    {
      core::MutexLock lock(mu_);
      if (shut_down_) return Error(503, "", "the broker is shutting down");
      if (auto it = instances_.find(id); it != instances_.end()) {
        auto existing = it->second;
        Entry& ex = *existing;
        core::MutexLock elock(ex.mu);
        bool same = ex.record.service_id == req.service_id && ex.record.plan_id == req.plan_id &&
                    ex.record.parameters == req.parameters &&
                    ex.record.organization_guid == req.organization_guid &&
                    ex.record.space_guid == req.space_guid;
        if (!same || ex.removed) {
          return Error(409, "",
                       fmt::format("instance {} already exists with other attributes "
                                   "(service, plan, parameters or context)",
                                   id));
        }
        if (ex.record.state == kStateDeploying && ex.record.operation == "provision") {
          return JsonResponse(202, {{"operation", ex.record.operation_key}});
        }
        if (ex.record.state == kStateFailed && ex.record.operation == "provision") {
          // The same provision again after it failed: try once more.
          ex.record.state = kStateDeploying;
          ex.record.operation_key = "provision-" + core::RandomSuffix(10);
          ex.record.operation_state = "in progress";
          ex.record.operation_description.clear();
          if (auto st = state_.Save(ex.record); !st.ok()) return Error(500, "", st.message());
          std::string key = ex.record.operation_key;
          retry = existing;
          retry_key = key;
        }
        if (ex.record.state == kStateDeleting) {
          return Error(422, "ConcurrencyError", fmt::format("instance {} is being deleted", id));
        }
        if (!retry) return JsonResponse(200, Json::object());
      }
      if (retry) {
        // fall through to enqueue outside the lock
      } else {
        entry = std::make_shared<Entry>();
        InstanceRecord rec;
        rec.id = id;
        rec.number = next_number_++;
        rec.service_id = req.service_id;
        rec.plan_id = req.plan_id;
        rec.organization_guid = req.organization_guid;
        rec.space_guid = req.space_guid;
        rec.parameters = req.parameters;
        rec.context = req.context;
        rec.state = kStateDeploying;
        rec.operation = "provision";
        rec.operation_key = "provision-" + core::RandomSuffix(10);
        rec.operation_state = "in progress";
        rec.database = fmt::format("d{}", rec.number);
        rec.admin_password = core::RandomPassword(32);
        rec.replication_password = core::RandomPassword(32);
        rec.encryption_key = NewBackupKey();
        rec.created_at = rec.updated_at = NowTimestamp();
        for (int i = 0; i < plan->limits.nodes; ++i) {
          auto port = AllocatePort();
          if (!port.ok()) return Error(500, "", port.status().message());
          rec.ports.push_back(*port);
        }
        if (auto st = state_.Save(rec); !st.ok()) return Error(500, "", st.message());
        operation = rec.operation_key;
        {
          core::MutexLock elock(entry->mu);
          entry->record = std::move(rec);
        }
        instances_[id] = entry;
      }
    }
    if (retry) {
      Enqueue(retry, Op{OpKind::kProvision});
      return JsonResponse(202, {{"operation", retry_key}});
    }
    Enqueue(entry, Op{OpKind::kProvision});
    return JsonResponse(202, {{"operation", operation}});
  }

  core::Result<int> AllocatePort() {
    core::MutexLock lock(ports_mu_);
    for (int attempt = 0; attempt < 20; ++attempt) {
      KLUTCH_ASSIGN_OR_RETURN(int port, core::FreeTcpPort(options_.engine.host));
      if (used_ports_.insert(port).second) return port;
    }
    return core::Internal("no free loopback port for a new instance");
  }

  http::Response Update(http::Request& r, const http::PathParams& p, const std::string& type) {
    std::string id(p.Get("instance"));
    if (auto e = CheckId("instance_id", id)) return Error(*e);
    if (auto e = RequireAsync(r.Query("accepts_incomplete"))) return Error(*e);
    UpdateRequest req;
    if (auto e = ParseUpdate(r.body, &req)) return Error(*e);
    auto entry = Find(id, type);
    if (entry == nullptr) return InstanceNotFound(id);
    std::string operation;
    {
      core::MutexLock lock(entry->mu);
      InstanceRecord& rec = entry->record;
      if (req.service_id != rec.service_id) {
        return Error(400, "",
                     fmt::format("service_id {} is not the instance's service {}; the "
                                 "service of an instance cannot change",
                                 core::GoQuote(req.service_id), core::GoQuote(rec.service_id)));
      }
      const Service* service = FindService(rec.service_id);
      const Plan* from = FindPlan(*service, rec.plan_id);
      const Plan* to = req.plan_id ? FindPlan(*service, *req.plan_id) : from;
      if (to == nullptr) {
        return Error(400, "",
                     fmt::format("plan_id {} is not a plan of {}; its plans are {}",
                                 core::GoQuote(*req.plan_id), service->name, PlanList(*service)));
      }
      if (auto st = CheckPlanChange(*service, *from, *to); !st.ok()) {
        return Error(400, "", st.message());
      }
      Json params =
          req.parameters ? MergeParameters(rec.parameters, *req.parameters) : rec.parameters;
      if (auto st = EngineFor(*service).ValidateParameters(params); !st.ok()) {
        return Error(400, "", st.message());
      }
      if (rec.state != kStateProvisioned && rec.state != kStateFailed) {
        return Error(
            422, "ConcurrencyError",
            fmt::format("instance {} is {}; retry when the operation has finished", id, rec.state));
      }
      if (to->id == rec.plan_id && params == rec.parameters && rec.state == kStateProvisioned) {
        return JsonResponse(200, Json::object());
      }
      rec.previous_plan_id = rec.plan_id;
      rec.previous_parameters = rec.parameters;
      rec.plan_id = to->id;
      rec.parameters = params;
      rec.state = kStateDeploying;
      rec.operation = "update";
      rec.operation_key = "update-" + core::RandomSuffix(10);
      rec.operation_state = "in progress";
      rec.operation_description.clear();
      rec.updated_at = NowTimestamp();
      for (int i = static_cast<int>(rec.ports.size()); i < to->limits.nodes; ++i) {
        auto port = AllocatePort();
        if (!port.ok()) return Error(500, "", port.status().message());
        rec.ports.push_back(*port);
      }
      if (auto st = state_.Save(rec); !st.ok()) return Error(500, "", st.message());
      operation = rec.operation_key;
    }
    Enqueue(entry, Op{OpKind::kUpdate});
    return JsonResponse(202, {{"operation", operation}});
  }

  http::Response Deprovision(http::Request& r, const http::PathParams& p, const std::string& type) {
    std::string id(p.Get("instance"));
    if (auto e = CheckId("instance_id", id)) return Error(*e);
    if (!r.Query("service_id") || !r.Query("plan_id")) {
      return Error(400, "", "the query parameters service_id and plan_id are required");
    }
    if (auto e = RequireAsync(r.Query("accepts_incomplete"))) return Error(*e);
    auto entry = Find(id, type);
    if (entry == nullptr) return JsonResponse(410, Json::object());
    std::string operation;
    {
      core::MutexLock lock(entry->mu);
      InstanceRecord& rec = entry->record;
      if (rec.state == kStateDeleting) return JsonResponse(202, {{"operation", rec.operation_key}});
      if (*r.Query("service_id") != rec.service_id) {
        return Error(
            400, "",
            fmt::format("service_id {} is not the instance's service {}",
                        core::GoQuote(*r.Query("service_id")), core::GoQuote(rec.service_id)));
      }
      if (rec.state == kStateDeploying) {
        return Error(422, "ConcurrencyError",
                     fmt::format("instance {} is being {}d; delete it when that has finished", id,
                                 rec.operation));
      }
      rec.state = kStateDeleting;
      rec.operation = "deprovision";
      rec.operation_key = "deprovision-" + core::RandomSuffix(10);
      rec.operation_state = "in progress";
      rec.operation_description.clear();
      if (auto st = state_.Save(rec); !st.ok()) return Error(500, "", st.message());
      operation = rec.operation_key;
    }
    Enqueue(entry, Op{OpKind::kDeprovision});
    return JsonResponse(202, {{"operation", operation}});
  }

  http::Response GetInstance(http::Request&, const http::PathParams& p, const std::string& type) {
    std::string id(p.Get("instance"));
    auto entry = Find(id, type);
    if (entry == nullptr) return InstanceNotFound(id);
    Entry& e = *entry;
    core::MutexLock lock(e.mu);
    // OSB: 404 while the provision is in progress, 422 ConcurrencyError while an update is.
    if (e.record.state == kStateDeploying && e.record.operation == "provision") {
      return Error(404, "NotFound",
                   fmt::format("instance {} is being provisioned; fetch it when the provision "
                               "has finished",
                               id));
    }
    if (e.record.state == kStateDeploying && e.record.operation == "update") {
      return Error(422, "ConcurrencyError",
                   fmt::format("instance {} is being updated; fetch it when the update has "
                               "finished",
                               id));
    }
    return JsonResponse(200, {{"service_id", e.record.service_id},
                              {"plan_id", e.record.plan_id},
                              {"parameters", e.record.parameters},
                              {"dashboard_url", ""}});
  }

  http::Response LastOperation(http::Request& r, const http::PathParams& p,
                               const std::string& type) {
    std::string id(p.Get("instance"));
    auto entry = Find(id, type);
    if (entry == nullptr) {
      return JsonResponse(410, {{"state", "succeeded"}, {"description", "the instance is gone"}});
    }
    Entry& e = *entry;
    core::MutexLock lock(e.mu);
    auto key = r.Query("operation");
    if (key && !key->empty() && *key != e.record.operation_key) {
      return Error(400, "",
                   fmt::format("operation {} is not the last operation of instance {} "
                               "(that is {})",
                               core::GoQuote(*key), id, core::GoQuote(e.record.operation_key)));
    }
    Json body = {
        {"state", e.record.operation_state.empty() ? "succeeded" : e.record.operation_state}};
    std::string description = e.record.operation_description;
    if (description.empty())
      description = fmt::format("{} {}", e.record.operation, e.record.operation_state);
    body["description"] = description;
    return JsonResponse(200, body);
  }

  Json InstanceDoc(const Entry& e) REQUIRES(e.mu) {
    Json creds = Json::array();
    for (const auto& [bid, b] : e.record.bindings) {
      creds.push_back({{"id", bid}, {"instance_id", e.record.number}, {"guid_at_tenant", bid}});
    }
    Json vm = Json::array();
    for (size_t i = 0; i < e.record.ports.size(); ++i) {
      vm.push_back({{"node", i}, {"host", options_.engine.host}, {"port", e.record.ports[i]}});
    }
    std::string message = ReportedState(e) == kStateFailed && e.record.state == kStateProvisioned
                              ? e.degraded_detail
                              : e.record.message;
    return {{"id", e.record.number},
            {"plan_guid", e.record.plan_id},
            {"service_guid", e.record.service_id},
            {"context",
             {{"organization_guid", e.record.organization_guid},
              {"space_guid", e.record.space_guid},
              {"parameters", e.record.parameters}}},
            {"dashboard_url", ""},
            {"deployment_name", fmt::format("klutch-{}", e.record.number)},
            {"state", ReportedState(e)},
            {"message", message},
            {"guid_at_tenant", e.record.id},
            {"tenant_id", e.record.organization_guid},
            {"provisioned_at",
             e.record.provisioned_at.empty() ? Json() : Json(e.record.provisioned_at)},
            {"deleted_at", nullptr},
            {"created_at", e.record.created_at},
            {"updated_at", e.record.updated_at},
            {"credentials", creds},
            {"vm_details", vm}};
  }

  http::Response InstanceDocument(http::Request&, const http::PathParams& p,
                                  const std::string& type) {
    std::string id(p.Get("instance"));
    auto entry = Find(id, type);
    if (entry == nullptr) return InstanceNotFound(id);
    core::MutexLock lock(entry->mu);
    return JsonResponse(200, InstanceDoc(*entry));
  }

  http::Response ListInstances(http::Request&, const http::PathParams&, const std::string& type) {
    Json resources = Json::array();
    for (auto& entry : Entries()) {
      core::MutexLock lock(entry->mu);
      const Service* s = FindService(entry->record.service_id);
      if (entry->removed || s == nullptr || s->type != type) continue;
      resources.push_back(InstanceDoc(*entry));
    }
    return JsonResponse(200, {{"total_results", resources.size()},
                              {"total_pages", 1},
                              {"current_page", 1},
                              {"prev_url", nullptr},
                              {"next_url", nullptr},
                              {"resources", resources}});
  }

  http::Response Bind(http::Request& r, const http::PathParams& p, const std::string& type) {
    auto started = SteadyClock::now();
    std::string id(p.Get("instance"));
    std::string binding_id(p.Get("binding"));
    if (auto e = CheckId("instance_id", id)) return Error(*e);
    if (auto e = CheckId("binding_id", binding_id)) return Error(*e);
    BindRequest req;
    if (auto e = ParseBind(r.body, &req)) return Error(*e);
    auto entry = Find(id, type);
    if (entry == nullptr) return InstanceNotFound(id);
    {
      core::MutexLock lock(entry->mu);
      if (auto it = entry->record.bindings.find(binding_id); it != entry->record.bindings.end()) {
        return ExistingBinding(entry->record, it->second, req);
      }
      if (entry->record.state != kStateProvisioned) {
        return Error(
            422, "ConcurrencyError",
            fmt::format("instance {} is {}; bind when it is provisioned", id, entry->record.state));
      }
    }
    core::MutexLock engine_lock(entry->engine_mu);
    InstanceRecord snapshot;
    BindingRecord binding;
    {
      core::MutexLock lock(entry->mu);
      snapshot = entry->record;
    }
    if (req.service_id != snapshot.service_id || req.plan_id != snapshot.plan_id) {
      return Error(
          400, "",
          fmt::format("service_id/plan_id {}/{} do not match instance {} "
                      "({}/{})",
                      core::GoQuote(req.service_id), core::GoQuote(req.plan_id), id,
                      core::GoQuote(snapshot.service_id), core::GoQuote(snapshot.plan_id)));
    }
    if (snapshot.state != kStateProvisioned) {
      return Error(
          422, "ConcurrencyError",
          fmt::format("instance {} is {}; bind when it is provisioned", id, snapshot.state));
    }
    if (auto it = snapshot.bindings.find(binding_id); it != snapshot.bindings.end()) {
      return ExistingBinding(snapshot, it->second, req);
    }
    const Service* service = FindService(snapshot.service_id);
    const Plan* plan = FindPlan(*service, snapshot.plan_id);
    binding.id = binding_id;
    binding.service_id = req.service_id;
    binding.plan_id = req.plan_id;
    binding.parameters = req.parameters;
    binding.username = BindingUsername(snapshot.id, binding_id);
    binding.password = core::RandomPassword(24);
    binding.created_at = NowTimestamp();
    auto credentials = EngineFor(*service).Bind(snapshot, *plan, binding);
    if (!credentials.ok()) {
      // Whatever part of the account was made goes again (the name is derived from the
      // binding ID, so a retry would also find it).
      (void)EngineFor(*service).Unbind(snapshot, binding);
      KLUTCH_LOG(kError, "broker", "bind {} on {}: {}", binding_id, id,
                 credentials.status().message());
      return Error(500, "",
                   fmt::format("creating the binding failed: {}", credentials.status().message()));
    }
    binding.credentials = *credentials;
    {
      core::MutexLock lock(entry->mu);
      entry->record.bindings[binding_id] = binding;
      if (auto st = state_.Save(entry->record); !st.ok()) return Error(500, "", st.message());
    }
    bind_duration_->Observe({{"operation", "bind"}},
                            std::chrono::duration<double>(SteadyClock::now() - started).count());
    return JsonResponse(201, {{"credentials", *credentials}});
  }

  // A bind for a binding ID that exists: 200 with its credentials when the request is the
  // same as the one that made it, 409 otherwise (OSB: identical repeat -> 200; same ID with
  // other attributes -> 409). The plan may be the one the binding was made on or the
  // instance's current one (a platform repeating a bind after a plan update sends that).
  // Bindings stored before their request was kept count as made with the instance's service
  // and plan and no parameters.
  static http::Response ExistingBinding(const InstanceRecord& instance, const BindingRecord& b,
                                        const BindRequest& req) {
    const std::string& service = b.service_id.empty() ? instance.service_id : b.service_id;
    const std::string& plan = b.plan_id.empty() ? instance.plan_id : b.plan_id;
    bool same_plan = req.plan_id == plan || req.plan_id == instance.plan_id;
    if (req.service_id == service && same_plan && req.parameters == b.parameters) {
      return JsonResponse(200, {{"credentials", b.credentials}});
    }
    return Error(409, "",
                 fmt::format("binding {} already exists with other attributes (it was made with "
                             "service_id {}, plan_id {} and parameters {}); use a new binding ID",
                             b.id, core::GoQuote(service), core::GoQuote(plan),
                             machinery::Dump(b.parameters)));
  }

  http::Response GetBinding(http::Request&, const http::PathParams& p, const std::string& type) {
    std::string id(p.Get("instance"));
    std::string binding_id(p.Get("binding"));
    auto entry = Find(id, type);
    if (entry == nullptr) return InstanceNotFound(id);
    core::MutexLock lock(entry->mu);
    auto it = entry->record.bindings.find(binding_id);
    if (it == entry->record.bindings.end()) {
      return Error(404, "NotFound", fmt::format("binding {} does not exist", binding_id));
    }
    return JsonResponse(200, {{"credentials", it->second.credentials}});
  }

  http::Response BindingLastOperation(http::Request&, const http::PathParams& p,
                                      const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return JsonResponse(410, Json::object());
    core::MutexLock lock(entry->mu);
    if (!entry->record.bindings.contains(std::string(p.Get("binding")))) {
      return JsonResponse(410, Json::object());
    }
    return JsonResponse(200, {{"state", "succeeded"}, {"description", "bindings are synchronous"}});
  }

  http::Response Unbind(http::Request& r, const http::PathParams& p, const std::string& type) {
    auto started = SteadyClock::now();
    std::string id(p.Get("instance"));
    std::string binding_id(p.Get("binding"));
    if (!r.Query("service_id") || !r.Query("plan_id")) {
      return Error(400, "", "the query parameters service_id and plan_id are required");
    }
    auto entry = Find(id, type);
    if (entry == nullptr) return JsonResponse(410, Json::object());
    core::MutexLock engine_lock(entry->engine_mu);
    InstanceRecord snapshot;
    {
      core::MutexLock lock(entry->mu);
      snapshot = entry->record;
    }
    auto it = snapshot.bindings.find(binding_id);
    if (it == snapshot.bindings.end()) return JsonResponse(410, Json::object());
    const Service* service = FindService(snapshot.service_id);
    if (auto st = EngineFor(*service).Unbind(snapshot, it->second); !st.ok()) {
      KLUTCH_LOG(kError, "broker", "unbind {} on {}: {}", binding_id, id, st.message());
      return Error(500, "", fmt::format("removing the binding failed: {}", st.message()));
    }
    {
      core::MutexLock lock(entry->mu);
      entry->record.bindings.erase(binding_id);
      if (auto st = state_.Save(entry->record); !st.ok()) return Error(500, "", st.message());
    }
    bind_duration_->Observe({{"operation", "unbind"}},
                            std::chrono::duration<double>(SteadyClock::now() - started).count());
    return JsonResponse(200, Json::object());
  }

  // --- backup manager --------------------------------------------------------------------

  static Json BackupJson(const BackupRecord& b) {
    return {{"id", b.id},
            {"size", b.size},
            {"status", b.status},
            {"triggered_at", b.triggered_at},
            {"finished_at", b.finished_at.empty() ? Json() : Json(b.finished_at)},
            {"downloadable", false},
            {"message", b.message}};
  }
  static Json RestoreJson(const RestoreRecord& x) {
    return {{"id", x.id},
            {"backup_id", x.backup_id},
            {"status", x.status},
            {"triggered_at", x.triggered_at},
            {"finished_at", x.finished_at.empty() ? Json() : Json(x.finished_at)},
            {"message", x.message}};
  }

  static http::Response NoInstance(std::string_view id) {
    return Error(404, "NotFound", fmt::format("instance {} not found", id));
  }

  http::Response CreateBackup(http::Request&, const http::PathParams& p, const std::string& type) {
    std::string id(p.Get("instance"));
    auto entry = Find(id, type);
    if (entry == nullptr) return NoInstance(id);
    int64_t backup_id = 0;
    {
      core::MutexLock lock(entry->mu);
      auto& rec = entry->record;
      if (entry->removed) return NoInstance(id);
      if (rec.state != kStateProvisioned && rec.state != kStateFailed) {
        return Error(
            422, "",
            fmt::format("instance {} is {}; back it up once it is provisioned", id, rec.state));
      }
      backup_id = rec.next_backup_id++;
      rec.backups.push_back(
          BackupRecord{.id = backup_id, .status = "queued", .triggered_at = NowTimestamp()});
      if (auto st = state_.Save(rec); !st.ok()) return Error(500, "", st.message());
    }
    Enqueue(entry, Op{OpKind::kBackup, backup_id});
    return JsonResponse(201,
                        {{"id", backup_id}, {"message", "job to back up the instance is queued"}});
  }

  http::Response ListBackups(http::Request&, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    core::MutexLock lock(entry->mu);
    Json list = Json::array();
    for (const auto& b : entry->record.backups) list.push_back(BackupJson(b));
    return JsonResponse(200, list);
  }

  static std::optional<int64_t> NumericId(const http::PathParams& p, std::string_view name) {
    auto v = core::ParseInt64(p.Get(name));
    if (!v || *v <= 0) return std::nullopt;
    return v;
  }

  http::Response GetBackup(http::Request&, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    auto bid = NumericId(p, "backup");
    if (!bid) return Error(400, "", "backup_id must be a positive integer");
    core::MutexLock lock(entry->mu);
    for (const auto& b : entry->record.backups) {
      if (b.id == *bid) return JsonResponse(200, BackupJson(b));
    }
    return Error(404, "NotFound", fmt::format("backup {} not found", *bid));
  }

  http::Response DeleteBackup(http::Request&, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    auto bid = NumericId(p, "backup");
    if (!bid) return Error(400, "", "backup_id must be a positive integer");
    core::MutexLock lock(entry->mu);
    auto& rec = entry->record;
    if (entry->removed) return NoInstance(p.Get("instance"));
    for (const auto& x : rec.restores) {
      if (x.backup_id == *bid && (x.status == "queued" || x.status == "running")) {
        return Error(423, "",
                     fmt::format("backup {} is being restored; delete it afterwards", *bid));
      }
    }
    for (auto& b : rec.backups) {
      if (b.id != *bid) continue;
      if (b.status == "queued" || b.status == "running") {
        return Error(
            423, "",
            fmt::format("backup {} is {}; delete it when it has finished", *bid, b.status));
      }
      if (!b.file.empty()) {
        std::error_code ec;
        fs::remove(state_.BackupDir(rec.number) / b.file, ec);
        if (ec)
          return Error(400, "", fmt::format("deleting the backup file failed: {}", ec.message()));
      }
      b.status = "deleted";
      b.file.clear();
      b.key.clear();
      if (auto st = state_.Save(rec); !st.ok()) return Error(500, "", st.message());
      return JsonResponse(200, {{"message", fmt::format("backup {} deleted", *bid)}});
    }
    return Error(404, "NotFound", fmt::format("backup {} not found", *bid));
  }

  http::Response CreateRestore(http::Request&, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    auto bid = NumericId(p, "backup");
    if (!bid) return Error(400, "", "backup_id must be a positive integer");
    int64_t restore_id = 0;
    {
      core::MutexLock lock(entry->mu);
      auto& rec = entry->record;
      if (entry->removed) return NoInstance(p.Get("instance"));
      if (rec.state != kStateProvisioned && rec.state != kStateFailed) {
        return Error(
            422, "",
            fmt::format("instance {} is {}; restore once it is provisioned", rec.id, rec.state));
      }
      const BackupRecord* backup = nullptr;
      for (const auto& b : rec.backups) {
        if (b.id == *bid) backup = &b;
      }
      if (backup == nullptr)
        return Error(404, "NotFound", fmt::format("backup {} not found", *bid));
      if (backup->status != "done") {
        return Error(422, "", fmt::format("backup {} is {}, not restorable", *bid, backup->status));
      }
      for (const auto& x : rec.restores) {
        if (x.status == "queued" || x.status == "running") {
          return Error(409, "",
                       fmt::format("restore {} of this instance is already {}", x.id, x.status));
        }
      }
      restore_id = rec.next_restore_id++;
      rec.restores.push_back(RestoreRecord{
          .id = restore_id, .backup_id = *bid, .status = "queued", .triggered_at = NowTimestamp()});
      if (auto st = state_.Save(rec); !st.ok()) return Error(500, "", st.message());
    }
    Enqueue(entry, Op{OpKind::kRestore, restore_id});
    return JsonResponse(202, {{"id", restore_id}});
  }

  http::Response ListRestores(http::Request&, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    core::MutexLock lock(entry->mu);
    Json list = Json::array();
    for (const auto& x : entry->record.restores) list.push_back(RestoreJson(x));
    return JsonResponse(200, list);
  }

  http::Response GetRestore(http::Request&, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    auto rid = NumericId(p, "restore");
    if (!rid) return Error(400, "", "restore_id must be a positive integer");
    core::MutexLock lock(entry->mu);
    for (const auto& x : entry->record.restores) {
      if (x.id == *rid) return JsonResponse(200, RestoreJson(x));
    }
    return Error(404, "NotFound", fmt::format("restore {} not found", *rid));
  }

  http::Response GetConfig(http::Request&, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    core::MutexLock lock(entry->mu);
    const Json& c = entry->record.backup_config;
    const Json* exclude = machinery::Find(c, {"exclude_from_auto_backup"});
    return JsonResponse(200,
                        {{"min_backup_count", options_.min_backups},
                         {"retention_time", options_.retention.count() / 24},
                         {"min_encryption_key_length", 8},
                         {"exclude_from_auto_backup", exclude != nullptr ? *exclude : Json(true)},
                         {"backup_type", "full"},
                         {"max_backup_count", options_.max_backups}});
  }

  http::Response PutConfig(http::Request& r, const http::PathParams& p, const std::string& type) {
    auto entry = Find(p.Get("instance"), type);
    if (entry == nullptr) return NoInstance(p.Get("instance"));
    auto body = machinery::ParseJson(r.body);
    if (!body.ok() || !body->is_object())
      return Error(400, "", "the request body must be a JSON object");
    Json update = Json::object();
    for (const auto& [k, v] : body->items()) {
      if (k == "encryption_key") {
        const auto* s = v.get_ptr<const std::string*>();
        if (s == nullptr || s->size() < 8) {
          return Error(400, "", "encryption_key must be a string of at least 8 characters");
        }
        update[k] = *s;
      } else if (k == "exclude_from_auto_backup" || k == "credentials_updated_by_user") {
        if (!v.is_boolean()) return Error(400, "", fmt::format("{} must be true or false", k));
        update[k] = v;
      } else {
        return Error(400, "",
                     fmt::format("unknown field {}; send encryption_key, "
                                 "exclude_from_auto_backup or credentials_updated_by_user",
                                 core::GoQuote(k)));
      }
    }
    if (update.empty()) return Error(400, "", "send at least one setting");
    core::MutexLock lock(entry->mu);
    auto& rec = entry->record;
    if (entry->removed) return NoInstance(p.Get("instance"));
    for (const auto& [k, v] : update.items()) {
      if (k == "encryption_key") {
        // Backups from now on use a key derived from the user's; older ones keep theirs.
        rec.encryption_key = core::HexEncode(DeriveKey(*v.get_ptr<const std::string*>()));
        rec.backup_config["encryption_key_set"] = true;
      } else {
        rec.backup_config[k] = v;
      }
    }
    if (auto st = state_.Save(rec); !st.ok()) return Error(500, "", st.message());
    return JsonResponse(200, {{"message", "backup configuration updated"}});
  }

  static std::string DeriveKey(const std::string& passphrase);
  // "b" and 12 hex digits derived from the instance and binding IDs: a bind interrupted by a
  // crash finds its half-made account again instead of leaving one behind.
  static std::string BindingUsername(const std::string& instance, const std::string& binding);

  // --- operations ------------------------------------------------------------------------

  void Enqueue(const std::shared_ptr<Entry>& entry, Op op) {
    std::string id;
    bool schedule = false;
    {
      core::MutexLock lock(entry->mu);
      entry->pending.push_back(op);
      if (!entry->running) {
        entry->running = true;
        schedule = true;
      }
      id = entry->record.id;
    }
    if (schedule) {
      core::MutexLock lock(mu_);
      ready_.push_back(id);
      cv_.Signal();
    }
  }

  void Work() {
    while (true) {
      std::shared_ptr<Entry> entry;
      {
        core::MutexLock lock(mu_);
        while (ready_.empty() && !shut_down_) cv_.Wait(mu_);
        if (shut_down_) return;
        std::string id = ready_.front();
        ready_.pop_front();
        auto it = instances_.find(id);
        if (it == instances_.end()) continue;
        entry = it->second;
      }
      Op op;
      {
        core::MutexLock lock(entry->mu);
        if (entry->pending.empty()) {
          entry->running = false;
          continue;
        }
        op = entry->pending.front();
        entry->pending.pop_front();
      }
      auto started = SteadyClock::now();
      core::Status status;
      if (op.kind == OpKind::kBackup || op.kind == OpKind::kRestore) {
        status = Run(*entry, op);  // binds may go on meanwhile
      } else {
        core::MutexLock engine_lock(entry->engine_mu);
        status = Run(*entry, op);
      }
      op_duration_->Observe(
          {{"operation", OpName(op.kind)}, {"result", status.ok() ? "success" : "failure"}},
          std::chrono::duration<double>(SteadyClock::now() - started).count());
      if (!status.ok()) {
        KLUTCH_LOG(kError, "broker", "{} failed: {}", OpName(op.kind), status.message());
      }
      bool again = false;
      std::string id;
      {
        core::MutexLock lock(entry->mu);
        id = entry->record.id;
        if (entry->removed) {
          entry->pending.clear();
        }
        again = !entry->pending.empty();
        if (!again) entry->running = false;
      }
      if (again) {
        core::MutexLock lock(mu_);
        ready_.push_back(id);
        cv_.Signal();
      }
    }
  }

  // Runs one operation; the entry's engine lock is held.
  core::Status Run(Entry& entry, const Op& op) {
    InstanceRecord rec;
    {
      core::MutexLock lock(entry.mu);
      rec = entry.record;
    }
    const Service* service = FindService(rec.service_id);
    if (service == nullptr) return core::Internal("unknown service " + rec.service_id);
    DataService& engine = EngineFor(*service);
    const Plan* plan = FindPlan(*service, rec.plan_id);
    if (plan == nullptr) return core::Internal("unknown plan " + rec.plan_id);
    switch (op.kind) {
      case OpKind::kProvision: {
        auto status = engine.Provision(rec, *plan, supervisor_);
        FinishOperation(entry, status, rec.operation_key);
        return status;
      }
      case OpKind::kUpdate: {
        const Plan* from = FindPlan(*service, rec.previous_plan_id);
        if (from == nullptr) from = plan;
        auto status = engine.Update(rec, *from, *plan, supervisor_);
        bool rolled_back = false;
        if (!status.ok()) {
          auto back = RollBack(engine, rec, *plan, *from);
          rolled_back = back.ok();
          if (!back.ok()) {
            status = core::Status(status.reason(),
                                  fmt::format("{}; going back to the previous plan and parameters "
                                              "failed too: {}",
                                              status.message(), back.message()));
          }
        }
        FinishOperation(entry, status, rec.operation_key, rolled_back ? from : nullptr);
        return status;
      }
      case OpKind::kStart: {
        auto status = engine.Start(rec, *plan, supervisor_);
        if (!status.ok()) {
          core::MutexLock lock(entry.mu);
          entry.degraded = true;
          entry.degraded_detail =
              "starting the instance after a broker restart failed: " + status.message();
        }
        return status;
      }
      case OpKind::kDeprovision: {
        for (int node = static_cast<int>(rec.ports.size()) - 1; node >= 0; --node) {
          supervisor_.Stop(rec.id, node);
        }
        auto status = state_.Remove(rec.number);
        if (!status.ok()) {
          FinishOperation(entry, status, rec.operation_key);
          return status;
        }
        {
          core::MutexLock lock(entry.mu);
          entry.removed = true;
        }
        {
          core::MutexLock lock(mu_);
          instances_.erase(rec.id);
        }
        core::MutexLock lock(ports_mu_);
        for (int p : rec.ports) used_ports_.erase(p);
        return core::Status::Ok();
      }
      case OpKind::kBackup:
        return RunBackup(entry, engine, rec, op.id);
      case OpKind::kRestore:
        return RunRestore(entry, engine, rec, *plan, op.id);
    }
    return core::Status::Ok();
  }

  // A failed update puts back what ran before it: the previous plan's and parameters'
  // configuration on the nodes the previous plan has (restarting them with it), and nodes the
  // update added are stopped and removed. `rec` is the record as the update saw it.
  core::Status RollBack(DataService& engine, const InstanceRecord& rec, const Plan& tried,
                        const Plan& previous) {
    InstanceRecord old = rec;
    old.plan_id = previous.id;
    old.parameters = rec.previous_parameters;
    size_t keep = std::min(rec.ports.size(), static_cast<size_t>(previous.limits.nodes));
    old.ports.resize(keep);
    for (size_t node = rec.ports.size(); node-- > keep;) {
      supervisor_.Stop(rec.id, static_cast<int>(node));
      std::error_code ec;
      // The engines keep node `n` in <instance dir>/n<n>.
      fs::remove_all(state_.InstanceDir(rec.number) / fmt::format("n{}", node), ec);
    }
    Plan from = tried;
    from.limits.nodes = static_cast<int>(keep);
    return engine.Update(old, from, previous, supervisor_);
  }

  // Records how an operation ended. `rolled_back_to`: a failed update whose previous plan and
  // parameters run again, so that the instance stays provisioned and usable.
  void FinishOperation(Entry& entry, const core::Status& status, const std::string& key,
                       const Plan* rolled_back_to = nullptr) {
    core::MutexLock lock(entry.mu);
    auto& rec = entry.record;
    if (rec.operation_key != key) return;
    rec.operation_state = status.ok() ? "succeeded" : "failed";
    rec.operation_description =
        status.ok() ? fmt::format("{} succeeded", rec.operation)
        : rolled_back_to != nullptr
            ? fmt::format(
                  "{} failed: {}; the instance runs on with its previous plan and "
                  "parameters",
                  rec.operation, status.message())
            : fmt::format("{} failed: {}", rec.operation, status.message());
    rec.state = status.ok() || rolled_back_to != nullptr ? kStateProvisioned : kStateFailed;
    rec.message = status.ok() ? "" : rec.operation_description;
    if (rolled_back_to != nullptr) {
      entry.degraded = false;
      size_t keep = std::min(rec.ports.size(), static_cast<size_t>(rolled_back_to->limits.nodes));
      core::MutexLock plock(ports_mu_);
      for (size_t i = keep; i < rec.ports.size(); ++i) used_ports_.erase(rec.ports[i]);
      rec.ports.resize(keep);
    }
    if (!status.ok() && rec.operation == "update" && !rec.previous_plan_id.empty()) {
      // The instance stays what it was: the platform may retry the update.
      rec.plan_id = rec.previous_plan_id;
      rec.parameters = rec.previous_parameters;
    }
    rec.updated_at = NowTimestamp();
    if (status.ok() && rec.provisioned_at.empty()) rec.provisioned_at = rec.updated_at;
    if (status.ok()) entry.degraded = false;
    if (auto st = state_.Save(rec); !st.ok()) {
      KLUTCH_LOG(kError, "broker", "saving instance {}: {}", rec.id, st.message());
    }
  }

  template <typename Fn>
  void UpdateBackup(Entry& entry, int64_t id, Fn fn) {
    core::MutexLock lock(entry.mu);
    for (auto& b : entry.record.backups) {
      if (b.id == id) fn(b);
    }
    if (auto st = state_.Save(entry.record); !st.ok()) {
      KLUTCH_LOG(kError, "broker", "saving instance {}: {}", entry.record.id, st.message());
    }
  }

  template <typename Fn>
  void UpdateRestore(Entry& entry, int64_t id, Fn fn) {
    core::MutexLock lock(entry.mu);
    for (auto& x : entry.record.restores) {
      if (x.id == id) fn(x);
    }
    if (auto st = state_.Save(entry.record); !st.ok()) {
      KLUTCH_LOG(kError, "broker", "saving instance {}: {}", entry.record.id, st.message());
    }
  }

  core::Status RunBackup(Entry& entry, DataService& engine, const InstanceRecord& rec, int64_t id) {
    UpdateBackup(entry, id, [](BackupRecord& b) { b.status = "running"; });
    fs::path dir = state_.BackupDir(rec.number);
    std::error_code ec;
    fs::create_directories(dir, ec);
    fs::permissions(dir, fs::perms::owner_all, ec);
    fs::path plain = dir / fmt::format("{}.plain", id);
    std::string file = fmt::format("{}.enc", id);
    core::Status status =
        ec ? core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()))
           : engine.Backup(rec, plain);
    if (status.ok()) status = EncryptFile(plain, dir / file, rec.encryption_key);
    fs::remove(plain, ec);
    uint64_t size = status.ok() ? fs::file_size(dir / file, ec) : 0;
    UpdateBackup(entry, id, [&](BackupRecord& b) {
      b.status = status.ok() ? "done" : "failed";
      b.finished_at = NowTimestamp();
      b.size = size;
      b.file = status.ok() ? file : "";
      b.key = status.ok() ? rec.encryption_key : "";
      b.message = status.ok() ? "" : status.message();
    });
    if (status.ok()) ApplyRetention(entry);
    return status;
  }

  // Marks backups beyond the retention deleted and removes their files.
  void ApplyRetention(Entry& entry) {
    core::MutexLock lock(entry.mu);
    auto& rec = entry.record;
    std::vector<BackupRecord*> done;
    for (auto& b : rec.backups) {
      if (b.status == "done") done.push_back(&b);
    }
    std::sort(done.begin(), done.end(), [](auto* a, auto* b) { return a->id > b->id; });
    auto cutoff = std::chrono::system_clock::now() - options_.retention;
    std::string cutoff_text = fmt::format(
        "{:%Y-%m-%dT%H:%M:%S}", fmt::gmtime(std::chrono::system_clock::to_time_t(cutoff)));
    std::set<int64_t> restoring;
    for (const auto& x : rec.restores) {
      if (x.status == "queued" || x.status == "running") restoring.insert(x.backup_id);
    }
    for (size_t i = 0; i < done.size(); ++i) {
      BackupRecord& b = *done[i];
      if (static_cast<int>(i) < options_.min_backups || restoring.contains(b.id)) continue;
      bool too_many = static_cast<int>(i) >= options_.max_backups;
      bool too_old = b.finished_at < cutoff_text;
      if (!too_many && !too_old) continue;
      std::error_code ec;
      fs::remove(state_.BackupDir(rec.number) / b.file, ec);
      b.status = "deleted";
      b.file.clear();
      b.key.clear();
      b.message = too_many ? "removed by retention (backup count)" : "removed by retention (age)";
    }
    (void)state_.Save(rec);
  }

  core::Status RunRestore(Entry& entry, DataService& engine, const InstanceRecord& rec,
                          const Plan& plan, int64_t id) {
    UpdateRestore(entry, id, [](RestoreRecord& x) { x.status = "running"; });
    const RestoreRecord* restore = nullptr;
    for (const auto& x : rec.restores) {
      if (x.id == id) restore = &x;
    }
    const BackupRecord* backup = nullptr;
    for (const auto& b : rec.backups) {
      if (restore != nullptr && b.id == restore->backup_id) backup = &b;
    }
    core::Status status;
    fs::path plain = state_.BackupDir(rec.number) / fmt::format("restore-{}.plain", id);
    if (backup == nullptr || backup->status != "done" || backup->file.empty()) {
      status = core::Invalid("the backup to restore is gone");
    } else {
      status = DecryptFile(state_.BackupDir(rec.number) / backup->file, plain, backup->key);
      if (status.ok()) {
        status = engine.Restore(rec, plan, plain, supervisor_);
      }
    }
    std::error_code ec;
    fs::remove(plain, ec);
    UpdateRestore(entry, id, [&](RestoreRecord& x) {
      x.status = status.ok() ? "done" : "failed";
      x.finished_at = NowTimestamp();
      x.message = status.ok() ? "" : status.message();
    });
    return status;
  }

  void OnNodeChange(const std::string& id, int node, bool up, const std::string& detail) {
    std::shared_ptr<Entry> entry;
    {
      core::MutexLock lock(mu_);
      auto it = instances_.find(id);
      if (it == instances_.end()) return;
      entry = it->second;
    }
    bool all_up = up && supervisor_.InstanceUp(id);
    core::MutexLock lock(entry->mu);
    if (!up) {
      entry->degraded = true;
      entry->degraded_detail = fmt::format("{}; the broker is restarting it", detail);
    } else if (all_up && entry->degraded) {
      entry->degraded = false;
      entry->degraded_detail = "recovered from a crash of one of its servers; watching it";
      entry->recovered_at = SteadyClock::now();
    }
    (void)node;
  }

  void QuotaLoop() {
    while (true) {
      {
        core::MutexLock lock(mu_);
        auto deadline = core::CondVar::DeadlineAfter(options_.quota_interval);
        while (!shut_down_ && SteadyClock::now() < deadline) quota_cv_.WaitUntil(mu_, deadline);
        if (shut_down_) return;
      }
      for (auto& entry : Entries()) {
        InstanceRecord rec;
        {
          core::MutexLock lock(entry->mu);
          if (entry->running || entry->record.state != kStateProvisioned) continue;
          rec = entry->record;
        }
        const Service* s = FindService(rec.service_id);
        const Plan* plan = s != nullptr ? FindPlan(*s, rec.plan_id) : nullptr;
        if (plan == nullptr) continue;
        Plan limited = *plan;
        if (options_.max_disk_per_instance > 0) {
          limited.limits.disk_quota_bytes =
              std::min(limited.limits.disk_quota_bytes, options_.max_disk_per_instance);
        }
        std::string message;
        {
          core::MutexLock engine_lock(entry->engine_mu);
          message = EngineFor(*s).EnforceQuota(rec, limited);
        }
        core::MutexLock lock(entry->mu);
        if (entry->record.message != message && entry->record.state == kStateProvisioned) {
          entry->record.message = message;
          (void)state_.Save(entry->record);
        }
      }
    }
  }

  BrokerOptions options_;
  StateDir state_;
  std::map<Engine, std::unique_ptr<DataService>> engines_;
  std::map<std::string, BasicCredentials> credentials_;
  serving::MetricRegistry metrics_;
  serving::GaugeFamily* instances_gauge_ = nullptr;
  serving::GaugeFamily* nodes_gauge_ = nullptr;
  serving::GaugeFamily* restarts_gauge_ = nullptr;
  serving::HistogramFamily* op_duration_ = nullptr;
  serving::HistogramFamily* bind_duration_ = nullptr;
  http::Router router_{[](int code, std::string message) {
    return Error(code, code == 405 ? "MethodNotAllowed" : "NotFound", std::move(message));
  }};

  core::Mutex mu_;
  core::CondVar cv_;        // workers wait here for ready_
  core::CondVar quota_cv_;  // the quota loop sleeps here
  bool shut_down_ GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<Entry>> instances_ GUARDED_BY(mu_);
  std::deque<std::string> ready_ GUARDED_BY(mu_);
  core::Mutex ports_mu_;
  std::set<int> used_ports_ GUARDED_BY(ports_mu_);
  int64_t next_number_ GUARDED_BY(mu_) = 1;
  std::vector<std::thread> workers_;
  std::thread quota_thread_;
  // Last: destroyed first, so that its watcher thread never calls OnNodeChange on members
  // that are gone.
  Supervisor supervisor_;
};

std::string Broker::Impl::DeriveKey(const std::string& passphrase) {
  // SHA-256 over a fixed label and the passphrase: a 256-bit key from the user's secret.
  std::string input = "klutch-broker-backup-key\n" + passphrase;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::string Broker::Impl::BindingUsername(const std::string& instance, const std::string& binding) {
  std::string input = instance + "/" + binding;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return "b" + core::HexEncode(std::string_view(reinterpret_cast<const char*>(digest), 6));
}

core::Result<std::unique_ptr<Broker>> Broker::Open(BrokerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  KLUTCH_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Broker>(new Broker(std::move(impl)));
}

Broker::Broker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Broker::~Broker() { impl_->Shutdown(); }
http::Response Broker::Serve(http::Request& request) { return impl_->Serve(request); }
std::vector<std::string> Broker::Bases() const { return impl_->BaseList(); }
BasicCredentials Broker::Credentials(std::string_view base) const {
  return impl_->Credentials(base);
}
std::string Broker::CaPem() const { return impl_->CaPem(); }
void Broker::Shutdown() { impl_->Shutdown(); }

}  // namespace klutch::broker
