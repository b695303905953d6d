#include "controllers/builtin_controllers.h"

#include <fstream>
#include <iterator>

#include "client/rest_client.h"
#include "controllers/access_reconcilers.h"
#include "controllers/crd_reconciler.h"
#include "controllers/garbage_collector.h"
#include "controllers/namespace_reconciler.h"
#include "reconcile/manager.h"

namespace klutch::controllers {

using client::Json;

namespace {

// The API server's registry, as the CRD controller sees it.
class ServerCrdServing final : public CrdServing {
 public:
  explicit ServerCrdServing(apiserver::ApiServer& server) : server_(server) {}
  core::Status Serve(const Json& crd) override { return server_.RegisterCrd(crd); }
  void StopServing(const std::string& name) override { server_.UnregisterCrd(name); }
  bool Serves(const std::string& crd_name, const std::string& group,
              const std::string& plural) const override {
    auto r = server_.registry().FindStored(group, plural);
    return r && r->crd_name == crd_name;
  }

 private:
  apiserver::ApiServer& server_;
};

// The framework-based controllers: an in-process client as system:apiserver, one Manager,
// shared informers.
class Framework final : public BuiltinControllers {
 public:
  static core::Result<std::unique_ptr<Framework>> Start(apiserver::ApiServer& server,
                                                        const BuiltinControllersOptions& options) {
    auto f = std::unique_ptr<Framework>(new Framework(server));
    client::RestConfig config;
    config.server = server.url();
    config.user_agent = "klutch-apiserver-controllers";
    config.qps = 0;  // in-process: the server's own limits apply
    client::RestClientOptions rest_options;
    rest_options.transport = client::NewInProcessTransport(
        server.handler(), http::ClientCertificate{.common_name = "system:apiserver",
                                                  .organizations = {"system:masters"}});
    KLUTCH_ASSIGN_OR_RETURN(f->rest_,
                            client::RestClient::New(std::move(config), std::move(rest_options)));
    std::ifstream ca_in(server.ca_file());
    std::string ca_pem((std::istreambuf_iterator<char>(ca_in)), std::istreambuf_iterator<char>());
    f->manager_ = std::make_unique<reconcile::Manager>(
        *f->rest_, reconcile::ManagerOptions{.name = "klutch-apiserver", .clock = options.clock});
    f->mapper_ = std::make_unique<client::RestMapper>(*f->rest_);
    auto& m = *f->manager_;
    client::Informer& namespaces = m.Informer(client::resources::kNamespaces);
    client::Informer& accounts = m.Informer(client::resources::kServiceAccounts,
                                            {.field_selector = "metadata.name=default"});
    client::Informer& root_cas =
        m.Informer(client::resources::kConfigMaps,
                   {.field_selector = std::string("metadata.name=") + kRootCaConfigMap});
    client::Informer& crds = m.Informer(client::resources::kCustomResourceDefinitions);

    f->namespace_ = std::make_unique<NamespaceReconciler>(
        *f->rest_, namespaces.indexer(), *f->mapper_,
        options.clock ? *options.clock : core::RealClock::Get());
    m.AddController("klutch-apiserver-namespace", *f->namespace_).For(namespaces);

    f->defaults_ = std::make_unique<NamespaceDefaultsReconciler>(
        *f->rest_, namespaces.indexer(), accounts.indexer(), root_cas.indexer(), ca_pem);
    auto& defaults = m.AddController("klutch-apiserver-namespace-defaults", *f->defaults_);
    defaults.For(namespaces);
    auto to_namespace = [](const Json& o) -> std::vector<reconcile::Request> {
      return {{"", machinery::Namespace(o)}};
    };
    defaults.Watches(accounts, to_namespace);
    defaults.Watches(root_cas, to_namespace);

    f->serving_ = std::make_unique<ServerCrdServing>(server);
    f->crd_ = std::make_unique<CrdReconciler>(*f->rest_, crds.indexer(), *f->serving_);
    m.AddController("klutch-apiserver-crd", *f->crd_, 2).For(crds);

    client::Informer& cluster_roles = m.Informer(client::resources::kClusterRoles);
    f->aggregation_ =
        std::make_unique<ClusterRoleAggregationReconciler>(*f->rest_, cluster_roles.indexer());
    auto& aggregation =
        m.AddController("klutch-apiserver-clusterrole-aggregation", *f->aggregation_);
    // Any ClusterRole may change what an aggregated role selects: re-check them all.
    client::Indexer& role_index = cluster_roles.indexer();
    aggregation.Watches(cluster_roles, [&role_index](const Json&) {
      std::vector<reconcile::Request> out;
      for (const auto& r : role_index.List()) {
        if (machinery::Find(*r, {"aggregationRule"})) out.push_back({"", machinery::Name(*r)});
      }
      return out;
    });

    client::Informer& token_secrets =
        m.Informer(client::resources::kSecrets,
                   {.field_selector = "type=kubernetes.io/service-account-token"});
    client::Informer& all_accounts = m.Informer(client::resources::kServiceAccounts);
    apiserver::AccessControl& access = server.access();
    f->tokens_ = std::make_unique<ServiceAccountTokenReconciler>(
        *f->rest_, token_secrets.indexer(), all_accounts.indexer(),
        [&access](const std::string& ns, const std::string& name, const std::string& uid,
                  const std::string& secret) {
          return access.tokens().IssueLegacy(ns, name, uid, secret);
        },
        ca_pem);
    auto& tokens = m.AddController("klutch-apiserver-serviceaccount-token", *f->tokens_);
    tokens.For(token_secrets);
    // A deleted or re-created account: revisit the token secrets that name it.
    client::Indexer& secret_index = token_secrets.indexer();
    tokens.Watches(all_accounts, [&secret_index](const Json& sa) {
      std::vector<reconcile::Request> out;
      const std::string ns = machinery::Namespace(sa);
      const std::string name = machinery::Name(sa);
      for (const auto& s : secret_index.List()) {
        if (machinery::Namespace(*s) == ns &&
            machinery::GetString(
                *s, {"metadata", "annotations", "kubernetes.io/service-account.name"}) == name) {
          out.push_back({ns, machinery::Name(*s)});
        }
      }
      return out;
    });

    f->gc_ = std::make_unique<GarbageCollector>(*f->rest_, *f->mapper_, m);
    KLUTCH_RETURN_IF_ERROR(f->gc_->Setup());

    KLUTCH_RETURN_IF_ERROR(m.Start());
    return f;
  }
  void Stop() override {
    if (manager_) manager_->Stop();
  }
  ~Framework() override { Stop(); }

 private:
  explicit Framework(apiserver::ApiServer&) {}
  std::unique_ptr<client::RestClient> rest_;
  std::unique_ptr<client::RestMapper> mapper_;
  std::unique_ptr<ServerCrdServing> serving_;
  std::unique_ptr<NamespaceReconciler> namespace_;
  std::unique_ptr<NamespaceDefaultsReconciler> defaults_;
  std::unique_ptr<CrdReconciler> crd_;
  std::unique_ptr<ClusterRoleAggregationReconciler> aggregation_;
  std::unique_ptr<ServiceAccountTokenReconciler> tokens_;
  std::unique_ptr<GarbageCollector> gc_;
  std::unique_ptr<reconcile::Manager> manager_;  // last: stopped and destroyed first
};

}  // namespace

core::Result<std::unique_ptr<BuiltinControllers>> StartBuiltinControllers(
    apiserver::ApiServer& server, BuiltinControllersOptions options) {
  KLUTCH_ASSIGN_OR_RETURN(auto framework, Framework::Start(server, options));
  return std::unique_ptr<BuiltinControllers>(std::move(framework));
}

}  // namespace klutch::controllers
