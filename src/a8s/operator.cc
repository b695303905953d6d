#include "a8s/operator.h"

#include <fmt/format.h>

#include <regex>

#include "a8s/a8s_names.h"
#include "a8s/backup_reconciler.h"
#include "a8s/instance_store.h"
#include "a8s/operator_context.h"
#include "a8s/postgresql_reconciler.h"
#include "a8s/restore_reconciler.h"
#include "a8s/service_binding_reconciler.h"
#include "apis/manifests.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"
#include "engines/engine_ca.h"
#include "engines/supervisor.h"
#include "machinery/object.h"
#include "reconcile/crd_installer.h"
#include "reconcile/events.h"

namespace klutch::a8s {

using reconcile::Request;

core::Status InstallOperatorApis(client::RestClient& rest, std::chrono::milliseconds timeout) {
  for (const apis::ManifestFile& file : apis::A8sCrds()) {
    auto crd = machinery::ParseYaml(file.text);
    if (!crd.ok()) return core::Internal("embedded " + file.name + ": " + crd.status().message());
    KLUTCH_RETURN_IF_ERROR(reconcile::InstallCrd(rest, *crd, timeout));
  }
  return core::Status::Ok();
}

core::Result<int> PostgresMajorVersion(const std::filesystem::path& postgres_bin) {
  core::ProcessSpec spec;
  spec.argv = {(postgres_bin / "postgres").string(), "--version"};
  KLUTCH_ASSIGN_OR_RETURN(auto result, core::RunProcess(spec, std::chrono::seconds(10)));
  static const std::regex kVersion(R"(PostgreSQL\)? (\d+))");
  std::smatch m;
  if (result.exit_code != 0 || !std::regex_search(result.output, m, kVersion)) {
    return core::Internal(
        fmt::format("{} --version said: {}", spec.argv[0], core::Trim(result.output)));
  }
  return static_cast<int>(core::ParseInt64(m[1].str()).value_or(0));
}

// The wiring: state, engine, informers, controllers and their watches; the logic is the
// reconcilers'.
class Operator::Impl {
 public:
  Impl(reconcile::Manager& manager, OperatorOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        events_(manager.rest(), {"klutch-operator", options_.instance}, &clock_),
        store_(engines::StateDir(options_.state_dir)),
        supervisor_([this](const std::string& instance, int, bool, const std::string&) {
          OnNodeChange(instance);
        }) {}
  ~Impl() { Stop(); }

  core::Status Setup() {
    std::vector<std::string> errors;
    KLUTCH_RETURN_IF_ERROR(store_.Load(&errors));
    for (const std::string& e : errors) KLUTCH_LOG(kError, "operator", "unreadable record: {}", e);
    KLUTCH_RETURN_IF_ERROR(engines::LoadOrCreateEngineCa(store_.dir().TlsDir(),
                                                         "klutch-operator-ca", options_.engine));
    options_.engine.instances_dir = store_.dir().InstancesDir();
    options_.engine.failover = true;
    KLUTCH_ASSIGN_OR_RETURN(int version, PostgresMajorVersion(options_.engine.postgres_bin));
    engine_ = engines::NewPostgresService(options_.engine);
    limiter_ = engines::ResourceLimiter::Detect(options_.cgroup_root, "klutch-operator");
    if (limiter_) {
      KLUTCH_LOG(kInfo, "operator", "CPU and memory limits are enforced with {}",
                 limiter_->Describe());
    } else {
      KLUTCH_LOG(kWarn, "operator",
                 "CPU and memory limits are not enforced: control groups under {} cannot be "
                 "managed by this process",
                 options_.cgroup_root.string());
    }

    client::InformerOptions o{.clock = &clock_};
    postgresqls_ = &manager_.Informer(kPostgresqls, o);
    bindings_ = &manager_.Informer(kServiceBindings, o);
    backups_ = &manager_.Informer(kBackups, o);
    restores_ = &manager_.Informer(kRestores, o);
    ctx_ = std::make_unique<OperatorContext>(
        OperatorContext{.rest = manager_.rest(),
                        .postgresqls = *postgresqls_,
                        .bindings = *bindings_,
                        .backups = *backups_,
                        .restores = *restores_,
                        .store = store_,
                        .engine_context = options_.engine,
                        .engine = *engine_,
                        .supervisor = supervisor_,
                        .events = events_,
                        .clock = clock_,
                        .machine_version = version,
                        .limiter = limiter_ ? &*limiter_ : nullptr,
                        .status_interval = options_.status_interval});
    postgresql_ = std::make_unique<PostgresqlReconciler>(*ctx_);
    binding_ = std::make_unique<ServiceBindingReconciler>(*ctx_);
    backup_ = std::make_unique<BackupReconciler>(*ctx_);
    restore_ = std::make_unique<RestoreReconciler>(*ctx_);

    auto& pg = manager_.AddController("klutch-operator-postgresql", *postgresql_, options_.workers);
    pg_controller_ = &pg;
    pg.For(*postgresqls_);
    // A binding coming or going may let a waiting deletion go on.
    pg.Watches(*bindings_, [](const Json& b) {
      std::string ns = machinery::GetString(b, {"spec", "instance", "namespace"});
      if (ns.empty()) ns = machinery::Namespace(b);
      return std::vector<Request>{{ns, machinery::GetString(b, {"spec", "instance", "name"})}};
    });
    auto& sb =
        manager_.AddController("klutch-operator-servicebinding", *binding_, options_.workers);
    sb.For(*bindings_);
    // An instance starting to run lets its waiting bindings go on.
    sb.Watches(*postgresqls_, [this](const Json& pg) { return BindingsNaming(pg); });
    auto& bk = manager_.AddController("klutch-operator-backup", *backup_, 2);
    bk.For(*backups_);
    auto& rs = manager_.AddController("klutch-operator-restore", *restore_, 2);
    rs.For(*restores_);
    rs.Watches(*backups_, [this](const Json& backup) { return RestoresOf(backup); });
    return core::Status::Ok();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    events_.Stop();
    if (options_.stop_instances) {
      supervisor_.StopAll();
      if (limiter_) {
        for (const InstanceRecord& record : store_.All()) {
          engines::RemoveNodeLimits(*limiter_, record);
        }
      }
    }
  }

 private:
  void OnNodeChange(const std::string& uid) {
    reconcile::Controller* pg = pg_controller_.load();
    if (pg == nullptr) return;
    if (auto record = store_.Get(uid)) pg->queue().Add(record->namespace_ + "/" + record->name);
  }

  std::vector<Request> BindingsNaming(const Json& pg) {
    std::vector<Request> out;
    for (const auto& b : bindings_->indexer().List()) {
      std::string ns = machinery::GetString(*b, {"spec", "instance", "namespace"});
      if (ns.empty()) ns = machinery::Namespace(*b);
      if (ns == machinery::Namespace(pg) &&
          machinery::GetString(*b, {"spec", "instance", "name"}) == machinery::Name(pg)) {
        out.push_back({machinery::Namespace(*b), machinery::Name(*b)});
      }
    }
    return out;
  }

  std::vector<Request> RestoresOf(const Json& backup) {
    std::vector<Request> out;
    for (const auto& r : restores_->indexer().List()) {
      if (machinery::Namespace(*r) == machinery::Namespace(backup) &&
          machinery::GetString(*r, {"spec", "backupName"}) == machinery::Name(backup)) {
        out.push_back({machinery::Namespace(*r), machinery::Name(*r)});
      }
    }
    return out;
  }

  reconcile::Manager& manager_;
  OperatorOptions options_;
  const core::Clock& clock_;
  reconcile::EventRecorder events_;
  InstanceStore store_;
  std::unique_ptr<engines::DataService> engine_;
  std::optional<engines::ResourceLimiter> limiter_;
  client::Informer* postgresqls_ = nullptr;
  client::Informer* bindings_ = nullptr;
  client::Informer* backups_ = nullptr;
  client::Informer* restores_ = nullptr;
  std::unique_ptr<OperatorContext> ctx_;
  std::unique_ptr<PostgresqlReconciler> postgresql_;
  std::unique_ptr<ServiceBindingReconciler> binding_;
  std::unique_ptr<BackupReconciler> backup_;
  std::unique_ptr<RestoreReconciler> restore_;
  std::atomic<reconcile::Controller*> pg_controller_{nullptr};
  std::atomic<bool> stopped_{false};
  // Last: its watcher thread calls OnNodeChange, which reads the members above.
  engines::Supervisor supervisor_;
};

Operator::Operator(reconcile::Manager& manager, OperatorOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}
Operator::~Operator() = default;
core::Status Operator::Setup() { return impl_->Setup(); }
void Operator::Stop() { impl_->Stop(); }

}  // namespace klutch::a8s
