#include "broker/instance_registry.h"

#include <fmt/format.h>
#include <openssl/sha.h>

#include <algorithm>
#include <system_error>

#include "core/log.h"
#include "core/net.h"
#include "core/random.h"
#include "core/strings.h"
#include "engines/crypto.h"

namespace klutch::broker {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

std::string OfferedServiceList(std::string_view type) {
  std::vector<std::string> names;
  for (const Service* s : ServicesOfType(type))
    names.push_back(fmt::format("{} (id {})", s->name, s->id));
  return core::Join(names, ", ");
}

std::string PlanNames(const Service& s) {
  std::vector<std::string> names;
  for (const auto& p : s.plans) names.push_back(p.name);
  return core::Join(names, ", ");
}

// Merges an update's parameters: null removes a key, other values replace.
Json MergeUpdateParameters(const Json& current, const Json& update) {
  Json out = current.is_object() ? current : Json::object();
  for (const auto& [k, v] : update.items()) {
    if (v.is_null())
      out.erase(k);
    else
      out[k] = v;
  }
  return out;
}

std::string Sha256Bytes(const std::string& input) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

// SHA-256 over a fixed label and the passphrase: a 256-bit key from the user's secret.
std::string DeriveBackupKey(const std::string& passphrase) {
  return Sha256Bytes("klutch-broker-backup-key\n" + passphrase);
}

// "b" and 12 hex digits derived from the instance and binding IDs: a bind interrupted by a
// crash finds its half-made account again instead of leaving one behind.
std::string BindingUsername(const std::string& instance, const std::string& binding) {
  return "b" +
         core::HexEncode(std::string_view(Sha256Bytes(instance + "/" + binding)).substr(0, 6));
}

RegistryResult Result(Outcome outcome, std::string message = {}) {
  return RegistryResult{.outcome = outcome, .message = std::move(message)};
}

RegistryResult Accepted(std::string operation) {
  return RegistryResult{.outcome = Outcome::kAccepted, .operation = std::move(operation)};
}

RegistryResult NoInstance(std::string_view id) {
  return Result(Outcome::kNoInstance, fmt::format("instance {} does not exist", id));
}

// A bind for a binding ID that exists: its credentials when the request is the same as the
// one that made it, kConflict otherwise (OSB: identical repeat -> 200; same ID with other
// attributes -> 409). The plan may be the one the binding was made on or the instance's
// current one (a platform repeating a bind after a plan update sends that). Bindings stored
// before their request was kept count as made with the instance's service and plan and no
// parameters.
RegistryResult ExistingBinding(const InstanceRecord& instance, const BindingRecord& b,
                               const BindRequest& req) {
  const std::string& service = b.service_id.empty() ? instance.service_id : b.service_id;
  const std::string& plan = b.plan_id.empty() ? instance.plan_id : b.plan_id;
  bool same_plan = req.plan_id == plan || req.plan_id == instance.plan_id;
  if (req.service_id == service && same_plan && req.parameters == b.parameters) {
    return RegistryResult{.outcome = Outcome::kAlreadyDone, .credentials = b.credentials};
  }
  return Result(Outcome::kConflict,
                fmt::format("binding {} already exists with other attributes (it was made with "
                            "service_id {}, plan_id {} and parameters {}); use a new binding ID",
                            b.id, core::GoQuote(service), core::GoQuote(plan),
                            machinery::Dump(b.parameters)));
}

bool IsActive(const std::string& status) { return status == "queued" || status == "running"; }

}  // namespace

InstanceRegistry::InstanceRegistry(BrokerOptions options, OperationObserver observer)
    : options_(std::move(options)),
      observer_(std::move(observer)),
      state_(options_.state_dir),
      supervisor_([this](const std::string& id, int, bool up, const std::string& detail) {
        OnNodeChange(id, up, detail);
      }) {}

InstanceRegistry::~InstanceRegistry() { Shutdown(); }

core::Status InstanceRegistry::Open() {
  options_.engine.instances_dir = state_.InstancesDir();
  // The catalog names each service's engine: adding a data service adds no line here.
  for (const Service& s : Services()) {
    if (!engines_.contains(s.engine)) engines_[s.engine] = s.new_engine(options_.engine);
  }
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
  for (auto& record : state_.LoadAll(&errors)) Resume(std::move(record));
  for (const auto& e : errors) KLUTCH_LOG(kError, "broker", "state: {}", e);
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
  quota_thread_ = std::thread([this] { QuotaLoop(); });
  return core::Status::Ok();
}

// Registers a loaded instance with the operations that finish what it was doing.
void InstanceRegistry::Resume(InstanceRecord record) {
  auto entry = std::make_shared<Entry>();
  // Servers that outlived the last broker are adopted (kStart) before an interrupted update
  // or deprovision runs again, so that it stops and restarts the real processes.
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
  std::string id;
  bool pending = false;
  {
    core::MutexLock lock(entry->mu);
    for (const Op& op : resume_ops) entry->pending.push_back(op);
    for (const auto& b : record.backups) {
      if (IsActive(b.status)) entry->pending.push_back(Op{OpKind::kBackup, b.id});
    }
    for (const auto& r : record.restores) {
      if (IsActive(r.status)) entry->pending.push_back(Op{OpKind::kRestore, r.id});
    }
    {
      core::MutexLock plock(ports_mu_);
      for (int p : record.ports) used_ports_.insert(p);
    }
    id = record.id;
    pending = !entry->pending.empty();
    if (pending) entry->running = true;
    core::MutexLock glock(mu_);
    next_number_ = std::max(next_number_, record.number + 1);
    entry->record = std::move(record);
  }
  core::MutexLock lock(mu_);
  if (pending) ready_.push_back(id);
  instances_[id] = entry;
}

void InstanceRegistry::Shutdown() {
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

// --- lookups ---------------------------------------------------------------------------

std::vector<std::shared_ptr<InstanceRegistry::Entry>> InstanceRegistry::Entries() {
  core::MutexLock lock(mu_);
  std::vector<std::shared_ptr<Entry>> out;
  for (auto& [id, e] : instances_) out.push_back(e);
  return out;
}

std::shared_ptr<InstanceRegistry::Entry> InstanceRegistry::Find(std::string_view id,
                                                                std::string_view type) {
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

std::string InstanceRegistry::ReportedState(const Entry& e) {
  if (e.record.state == kStateProvisioned &&
      (e.degraded || SteadyClock::now() - e.recovered_at < options_.recovery_hold)) {
    return kStateFailed;
  }
  return e.record.state;
}

InstanceView InstanceRegistry::ViewOf(const Entry& e) {
  InstanceView view{.record = e.record, .reported_state = ReportedState(e)};
  view.message = view.reported_state == kStateFailed && e.record.state == kStateProvisioned
                     ? e.degraded_detail
                     : e.record.message;
  return view;
}

std::optional<InstanceView> InstanceRegistry::Get(std::string_view type, std::string_view id) {
  auto entry = Find(id, type);
  if (entry == nullptr) return std::nullopt;
  core::MutexLock lock(entry->mu);
  return ViewOf(*entry);
}

std::vector<InstanceView> InstanceRegistry::List(std::string_view type) {
  std::vector<InstanceView> out;
  for (auto& entry : Entries()) {
    core::MutexLock lock(entry->mu);
    const Service* s = FindService(entry->record.service_id);
    if (entry->removed || s == nullptr || s->type != type) continue;
    out.push_back(ViewOf(*entry));
  }
  return out;
}

std::map<std::pair<std::string, std::string>, int> InstanceRegistry::CountByServiceAndState() {
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
  return counts;
}

// --- ports -----------------------------------------------------------------------------

core::Result<int> InstanceRegistry::AllocatePort() {
  core::MutexLock lock(ports_mu_);
  for (int attempt = 0; attempt < 20; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(int port, core::FreeTcpPort(options_.engine.host));
    if (used_ports_.insert(port).second) return port;
  }
  return core::Internal("no free loopback port for a new instance");
}

void InstanceRegistry::ReleasePorts(const std::vector<int>& ports) {
  core::MutexLock lock(ports_mu_);
  for (int p : ports) used_ports_.erase(p);
}

// --- OSB -------------------------------------------------------------------------------

RegistryResult InstanceRegistry::Provision(std::string_view type, const std::string& id,
                                           const ProvisionRequest& req) {
  const Service* service = FindService(req.service_id);
  if (service == nullptr || service->type != type) {
    return Result(Outcome::kInvalid,
                  fmt::format("service_id {} is not offered here; this broker runs {}",
                              core::GoQuote(req.service_id), OfferedServiceList(type)));
  }
  const Plan* plan = FindPlan(*service, req.plan_id);
  if (plan == nullptr) {
    return Result(Outcome::kInvalid,
                  fmt::format("plan_id {} is not a plan of {}; its plans are {}",
                              core::GoQuote(req.plan_id), service->name, PlanNames(*service)));
  }
  if (auto st = EngineFor(*service).ValidateParameters(req.parameters); !st.ok()) {
    return Result(Outcome::kInvalid, st.message());
  }
  return ProvisionNew(id, req, *plan);
}

// A provision of an instance ID that exists: the same request is answered by the state of
// the provision it made, and tried once more when that failed.
RegistryResult InstanceRegistry::ProvisionAgain(const std::shared_ptr<Entry>& entry,
                                                const ProvisionRequest& req) {
  std::string key;
  {
    Entry& ex = *entry;
    core::MutexLock lock(ex.mu);
    const std::string& id = ex.record.id;
    bool same = ex.record.service_id == req.service_id && ex.record.plan_id == req.plan_id &&
                ex.record.parameters == req.parameters &&
                ex.record.organization_guid == req.organization_guid &&
                ex.record.space_guid == req.space_guid;
    if (!same || ex.removed) {
      return Result(Outcome::kConflict,
                    fmt::format("instance {} already exists with other attributes "
                                "(service, plan, parameters or context)",
                                id));
    }
    if (ex.record.state == kStateDeploying && ex.record.operation == "provision") {
      return Accepted(ex.record.operation_key);
    }
    if (ex.record.state == kStateDeleting) {
      return Result(Outcome::kBusy, fmt::format("instance {} is being deleted", id));
    }
    if (ex.record.state != kStateFailed || ex.record.operation != "provision") {
      return Result(Outcome::kAlreadyDone);
    }
    // The same provision again after it failed: try once more.
    ex.record.state = kStateDeploying;
    ex.record.operation_key = "provision-" + core::RandomSuffix(10);
    ex.record.operation_state = "in progress";
    ex.record.operation_description.clear();
    if (auto st = state_.Save(ex.record); !st.ok()) return Result(Outcome::kFailed, st.message());
    key = ex.record.operation_key;
  }
  Enqueue(entry, Op{OpKind::kProvision});
  return Accepted(key);
}

RegistryResult InstanceRegistry::ProvisionNew(const std::string& id, const ProvisionRequest& req,
                                              const Plan& plan) {
  auto entry = std::make_shared<Entry>();
  std::string operation;
  std::shared_ptr<Entry> existing;  // made meanwhile by the same request
  {
    core::MutexLock lock(mu_);
    if (shut_down_) return Result(Outcome::kShuttingDown, "the broker is shutting down");
    if (auto it = instances_.find(id); it != instances_.end()) {
      existing = it->second;
    } else {
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
      rec.encryption_key = engines::NewBackupKey();
      rec.created_at = rec.updated_at = NowTimestamp();
      for (int i = 0; i < plan.limits.PortCount(); ++i) {
        auto port = AllocatePort();
        if (!port.ok()) return Result(Outcome::kFailed, port.status().message());
        rec.ports.push_back(*port);
      }
      if (auto st = state_.Save(rec); !st.ok()) return Result(Outcome::kFailed, st.message());
      operation = rec.operation_key;
      {
        core::MutexLock elock(entry->mu);
        entry->record = std::move(rec);
      }
      instances_[id] = entry;
    }
  }
  if (existing != nullptr) return ProvisionAgain(existing, req);
  Enqueue(entry, Op{OpKind::kProvision});
  return Accepted(operation);
}

RegistryResult InstanceRegistry::Update(std::string_view type, const std::string& id,
                                        const UpdateRequest& req) {
  auto entry = Find(id, type);
  if (entry == nullptr) return NoInstance(id);
  std::string operation;
  {
    core::MutexLock lock(entry->mu);
    InstanceRecord& rec = entry->record;
    if (req.service_id != rec.service_id) {
      return Result(Outcome::kInvalid,
                    fmt::format("service_id {} is not the instance's service {}; the "
                                "service of an instance cannot change",
                                core::GoQuote(req.service_id), core::GoQuote(rec.service_id)));
    }
    const Service* service = FindService(rec.service_id);
    const Plan* from = FindPlan(*service, rec.plan_id);
    const Plan* to = req.plan_id ? FindPlan(*service, *req.plan_id) : from;
    if (to == nullptr) {
      return Result(Outcome::kInvalid,
                    fmt::format("plan_id {} is not a plan of {}; its plans are {}",
                                core::GoQuote(*req.plan_id), service->name, PlanNames(*service)));
    }
    if (auto st = CheckPlanChange(*service, *from, *to); !st.ok()) {
      return Result(Outcome::kInvalid, st.message());
    }
    Json params =
        req.parameters ? MergeUpdateParameters(rec.parameters, *req.parameters) : rec.parameters;
    if (auto st = EngineFor(*service).ValidateParameters(params); !st.ok()) {
      return Result(Outcome::kInvalid, st.message());
    }
    if (rec.state != kStateProvisioned && rec.state != kStateFailed) {
      return Result(Outcome::kBusy, fmt::format("instance {} is {}; retry when the operation has "
                                                "finished",
                                                id, rec.state));
    }
    if (to->id == rec.plan_id && params == rec.parameters && rec.state == kStateProvisioned) {
      return Result(Outcome::kAlreadyDone);
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
    for (int i = static_cast<int>(rec.ports.size()); i < to->limits.PortCount(); ++i) {
      auto port = AllocatePort();
      if (!port.ok()) return Result(Outcome::kFailed, port.status().message());
      rec.ports.push_back(*port);
    }
    if (auto st = state_.Save(rec); !st.ok()) return Result(Outcome::kFailed, st.message());
    operation = rec.operation_key;
  }
  Enqueue(entry, Op{OpKind::kUpdate});
  return Accepted(operation);
}

RegistryResult InstanceRegistry::Deprovision(std::string_view type, const std::string& id,
                                             std::string_view service_id) {
  auto entry = Find(id, type);
  if (entry == nullptr) return Result(Outcome::kGone);
  std::string operation;
  {
    core::MutexLock lock(entry->mu);
    InstanceRecord& rec = entry->record;
    if (rec.state == kStateDeleting) return Accepted(rec.operation_key);
    if (service_id != rec.service_id) {
      return Result(Outcome::kInvalid,
                    fmt::format("service_id {} is not the instance's service {}",
                                core::GoQuote(service_id), core::GoQuote(rec.service_id)));
    }
    if (rec.state == kStateDeploying) {
      return Result(Outcome::kBusy,
                    fmt::format("instance {} is being {}d; delete it when that has finished", id,
                                rec.operation));
    }
    rec.state = kStateDeleting;
    rec.operation = "deprovision";
    rec.operation_key = "deprovision-" + core::RandomSuffix(10);
    rec.operation_state = "in progress";
    rec.operation_description.clear();
    if (auto st = state_.Save(rec); !st.ok()) return Result(Outcome::kFailed, st.message());
    operation = rec.operation_key;
  }
  Enqueue(entry, Op{OpKind::kDeprovision});
  return Accepted(operation);
}

RegistryResult InstanceRegistry::Bind(std::string_view type, const std::string& id,
                                      const std::string& binding_id, const BindRequest& req) {
  auto entry = Find(id, type);
  if (entry == nullptr) return NoInstance(id);
  auto not_provisioned = [&](const std::string& state) {
    return Result(Outcome::kBusy,
                  fmt::format("instance {} is {}; bind when it is provisioned", id, state));
  };
  {
    core::MutexLock lock(entry->mu);
    if (auto it = entry->record.bindings.find(binding_id); it != entry->record.bindings.end()) {
      return ExistingBinding(entry->record, it->second, req);
    }
    if (entry->record.state != kStateProvisioned) return not_provisioned(entry->record.state);
  }
  core::MutexLock engine_lock(entry->engine_mu);
  InstanceRecord snapshot;
  {
    core::MutexLock lock(entry->mu);
    snapshot = entry->record;
  }
  if (req.service_id != snapshot.service_id || req.plan_id != snapshot.plan_id) {
    return Result(Outcome::kInvalid,
                  fmt::format("service_id/plan_id {}/{} do not match instance {} "
                              "({}/{})",
                              core::GoQuote(req.service_id), core::GoQuote(req.plan_id), id,
                              core::GoQuote(snapshot.service_id), core::GoQuote(snapshot.plan_id)));
  }
  if (snapshot.state != kStateProvisioned) return not_provisioned(snapshot.state);
  if (auto it = snapshot.bindings.find(binding_id); it != snapshot.bindings.end()) {
    return ExistingBinding(snapshot, it->second, req);
  }
  const Service* service = FindService(snapshot.service_id);
  const Plan* plan = FindPlan(*service, snapshot.plan_id);
  BindingRecord binding;
  binding.id = binding_id;
  binding.service_id = req.service_id;
  binding.plan_id = req.plan_id;
  binding.parameters = req.parameters;
  binding.username = BindingUsername(snapshot.id, binding_id);
  binding.password = core::RandomPassword(24);
  binding.created_at = NowTimestamp();
  auto credentials = EngineFor(*service).Bind(snapshot, plan->limits, binding);
  if (!credentials.ok()) {
    // Whatever part of the account was made goes again (the name is derived from the
    // binding ID, so a retry would also find it).
    (void)EngineFor(*service).Unbind(snapshot, plan->limits, binding);
    KLUTCH_LOG(kError, "broker", "bind {} on {}: {}", binding_id, id,
               credentials.status().message());
    return Result(Outcome::kFailed,
                  fmt::format("creating the binding failed: {}", credentials.status().message()));
  }
  binding.credentials = *credentials;
  {
    core::MutexLock lock(entry->mu);
    entry->record.bindings[binding_id] = binding;
    if (auto st = state_.Save(entry->record); !st.ok()) {
      return Result(Outcome::kFailed, st.message());
    }
  }
  return RegistryResult{.outcome = Outcome::kDone, .credentials = *credentials};
}

RegistryResult InstanceRegistry::Unbind(std::string_view type, const std::string& id,
                                        const std::string& binding_id) {
  auto entry = Find(id, type);
  if (entry == nullptr) return Result(Outcome::kGone);
  core::MutexLock engine_lock(entry->engine_mu);
  InstanceRecord snapshot;
  {
    core::MutexLock lock(entry->mu);
    snapshot = entry->record;
  }
  auto it = snapshot.bindings.find(binding_id);
  if (it == snapshot.bindings.end()) return Result(Outcome::kGone);
  const Service* service = FindService(snapshot.service_id);
  const Plan* plan = FindPlan(*service, snapshot.plan_id);
  if (auto st = EngineFor(*service).Unbind(snapshot, plan != nullptr ? plan->limits : PlanLimits{},
                                           it->second);
      !st.ok()) {
    KLUTCH_LOG(kError, "broker", "unbind {} on {}: {}", binding_id, id, st.message());
    return Result(Outcome::kFailed, fmt::format("removing the binding failed: {}", st.message()));
  }
  {
    core::MutexLock lock(entry->mu);
    entry->record.bindings.erase(binding_id);
    if (auto st = state_.Save(entry->record); !st.ok()) {
      return Result(Outcome::kFailed, st.message());
    }
  }
  return Result(Outcome::kDone);
}

// --- backup manager --------------------------------------------------------------------

RegistryResult InstanceRegistry::CreateBackup(std::string_view type, const std::string& id) {
  auto entry = Find(id, type);
  if (entry == nullptr) return NoInstance(id);
  int64_t backup_id = 0;
  {
    core::MutexLock lock(entry->mu);
    auto& rec = entry->record;
    if (entry->removed) return NoInstance(id);
    if (rec.state != kStateProvisioned && rec.state != kStateFailed) {
      return Result(Outcome::kNotReady, fmt::format("instance {} is {}; back it up once it is "
                                                    "provisioned",
                                                    id, rec.state));
    }
    backup_id = rec.next_backup_id++;
    rec.backups.push_back(
        BackupRecord{.id = backup_id, .status = "queued", .triggered_at = NowTimestamp()});
    if (auto st = state_.Save(rec); !st.ok()) return Result(Outcome::kFailed, st.message());
  }
  Enqueue(entry, Op{OpKind::kBackup, backup_id});
  return RegistryResult{.outcome = Outcome::kAccepted, .id = backup_id};
}

RegistryResult InstanceRegistry::DeleteBackup(std::string_view type, const std::string& id,
                                              int64_t bid) {
  auto entry = Find(id, type);
  if (entry == nullptr) return NoInstance(id);
  core::MutexLock lock(entry->mu);
  auto& rec = entry->record;
  if (entry->removed) return NoInstance(id);
  for (const auto& x : rec.restores) {
    if (x.backup_id == bid && IsActive(x.status)) {
      return Result(Outcome::kInUse,
                    fmt::format("backup {} is being restored; delete it afterwards", bid));
    }
  }
  for (auto& b : rec.backups) {
    if (b.id != bid) continue;
    if (IsActive(b.status)) {
      return Result(Outcome::kInUse,
                    fmt::format("backup {} is {}; delete it when it has finished", bid, b.status));
    }
    if (!b.file.empty()) {
      std::error_code ec;
      fs::remove(state_.BackupDir(rec.number) / b.file, ec);
      if (ec) {
        return Result(Outcome::kInvalid,
                      fmt::format("deleting the backup file failed: {}", ec.message()));
      }
    }
    b.status = "deleted";
    b.file.clear();
    b.key.clear();
    if (auto st = state_.Save(rec); !st.ok()) return Result(Outcome::kFailed, st.message());
    return Result(Outcome::kDone, fmt::format("backup {} deleted", bid));
  }
  return Result(Outcome::kNotFound, fmt::format("backup {} not found", bid));
}

RegistryResult InstanceRegistry::CreateRestore(std::string_view type, const std::string& id,
                                               int64_t bid) {
  auto entry = Find(id, type);
  if (entry == nullptr) return NoInstance(id);
  int64_t restore_id = 0;
  {
    core::MutexLock lock(entry->mu);
    auto& rec = entry->record;
    if (entry->removed) return NoInstance(id);
    if (rec.state != kStateProvisioned && rec.state != kStateFailed) {
      return Result(Outcome::kNotReady, fmt::format("instance {} is {}; restore once it is "
                                                    "provisioned",
                                                    rec.id, rec.state));
    }
    const BackupRecord* backup = nullptr;
    for (const auto& b : rec.backups) {
      if (b.id == bid) backup = &b;
    }
    if (backup == nullptr) {
      return Result(Outcome::kNotFound, fmt::format("backup {} not found", bid));
    }
    if (backup->status != "done") {
      return Result(Outcome::kNotReady,
                    fmt::format("backup {} is {}, not restorable", bid, backup->status));
    }
    for (const auto& x : rec.restores) {
      if (IsActive(x.status)) {
        return Result(Outcome::kConflict,
                      fmt::format("restore {} of this instance is already {}", x.id, x.status));
      }
    }
    restore_id = rec.next_restore_id++;
    rec.restores.push_back(RestoreRecord{
        .id = restore_id, .backup_id = bid, .status = "queued", .triggered_at = NowTimestamp()});
    if (auto st = state_.Save(rec); !st.ok()) return Result(Outcome::kFailed, st.message());
  }
  Enqueue(entry, Op{OpKind::kRestore, restore_id});
  return RegistryResult{.outcome = Outcome::kAccepted, .id = restore_id};
}

RegistryResult InstanceRegistry::ConfigureBackups(std::string_view type, const std::string& id,
                                                  const Json& settings) {
  auto entry = Find(id, type);
  if (entry == nullptr) return NoInstance(id);
  core::MutexLock lock(entry->mu);
  auto& rec = entry->record;
  if (entry->removed) return NoInstance(id);
  for (const auto& [k, v] : settings.items()) {
    if (k == "encryption_key") {
      // Backups from now on use a key derived from the user's; older ones keep theirs.
      rec.encryption_key = core::HexEncode(DeriveBackupKey(*v.get_ptr<const std::string*>()));
      rec.backup_config["encryption_key_set"] = true;
    } else {
      rec.backup_config[k] = v;
    }
  }
  if (auto st = state_.Save(rec); !st.ok()) return Result(Outcome::kFailed, st.message());
  return Result(Outcome::kDone, "backup configuration updated");
}

}  // namespace klutch::broker
