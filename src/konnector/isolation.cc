// The two isolation strategies of an export's objects on the provider (§4.9-§4.12).
#include "konnector/isolation.h"

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "client/multi_namespace_informer.h"
#include "konnector/connection.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

// Namespaced exports: the consumer namespace maps to the provider namespace of its
// APIServiceNamespace; one informer per mapped provider namespace.
class NamespacedIsolation final : public Isolation {
 public:
  NamespacedIsolation(Connection& connection, const client::GroupVersionResource& gvr,
                      const client::InformerOptions& options)
      : connection_(connection),
        cache_(std::make_unique<client::MultiNamespaceInformer>(connection.provider(), gvr,
                                                                options)) {}

  void Watch(client::EventHandler handler,
             std::function<void(const std::string&)> on_synced) override {
    cache_->AddEventHandler(std::move(handler));
    cache_->OnSynced([this, on_synced = std::move(on_synced)](const std::string& pns) {
      std::string cns = connection_.ConsumerNamespaceFor(pns);
      if (!cns.empty()) on_synced(cns);
    });
  }
  void Start() override { cache_->Start(); }
  void Stop() override { cache_->Stop(); }
  ObjectPtr Get(const std::string& key) const override { return cache_->Get(key); }
  bool HasSynced(const std::string& key) const override {
    return cache_->HasSynced(Request::FromKey(key).ns);
  }
  bool OnNamespaceMapped(const std::string& pns, bool deleted) override {
    if (!pns.empty()) {
      if (deleted) {
        cache_->RemoveNamespace(pns);
      } else {
        cache_->AddNamespace(pns);
      }
    }
    return true;
  }

  std::string ProviderKey(const std::string& consumer_key) const override {
    Request r = Request::FromKey(consumer_key);
    std::string pns = connection_.ProviderNamespaceFor(r.ns);
    return pns.empty() ? "" : pns + "/" + r.name;
  }
  std::string ConsumerKey(const std::string& provider_key) const override {
    Request r = Request::FromKey(provider_key);
    std::string cns = connection_.ConsumerNamespaceFor(r.ns);
    return cns.empty() ? "" : cns + "/" + r.name;
  }
  bool Ours(const Json&) const override { return true; }

  reconcile::Step Place(const Request& consumer, bool request_namespace,
                        ProviderPlace& place) override {
    ObjectPtr asn = connection_.service_namespaces().indexer().Get(connection_.provider_ns() + "/" +
                                                                   consumer.ns);
    if (!asn) {
      if (!request_namespace) return Result::Done();
      return RequestNamespace(consumer.ns);
    }
    place.ns = machinery::GetString(*asn, {"status", "namespace"});
    place.name = consumer.name;
    if (place.ns.empty()) return Result::Done();  // the provider has not assigned one yet
    return reconcile::Continue();
  }
  void ToProvider(Json& object, const ProviderPlace& place) const override {
    object["metadata"]["namespace"] = place.ns;
  }
  void ToConsumer(Json&, const Request&) const override {}
  Json StatusToConsumer(const Json& status, const std::string& pns,
                        const std::string& cns) const override {
    return StatusInConsumerTerms(status, pns, cns);
  }

 private:
  // An APIServiceNamespace for consumer namespace `cns`; ends the pass.
  core::Result<Result> RequestNamespace(const std::string& cns) {
    Json object = {{"apiVersion", std::string(apis::klutch::kApiVersion)},
                   {"kind", "APIServiceNamespace"},
                   {"metadata", {{"name", cns}, {"namespace", connection_.provider_ns()}}},
                   {"spec", Json::object()}};
    auto r = client::ResourceClient(connection_.provider(), apis::klutch::kApiServiceNamespaces,
                                    connection_.provider_ns())
                 .Create(object);
    connection_.ctx().metrics.writes.Increment({{"cluster", "provider"}, {"verb", "create"}});
    if (!r.ok() && !core::IsAlreadyExists(r.status())) return r.status();
    return Result::Done();  // its events bring the object back
  }

  Connection& connection_;
  std::unique_ptr<client::MultiNamespaceInformer> cache_;
};

// Cluster-scoped exports: the copies of every consumer share one provider scope, named with
// the connection's cluster namespace as prefix; one cluster-wide informer.
class ClusterIsolation final : public Isolation {
 public:
  ClusterIsolation(Connection& connection, const client::GroupVersionResource& gvr,
                   const client::InformerOptions& options, std::string namespace_uid)
      : connection_(connection), namespace_uid_(std::move(namespace_uid)) {
    client::InformerOptions o = options;
    // on_synced_ is set by Watch() before Start() starts the informer's thread.
    o.on_synced = [this] {
      if (on_synced_) on_synced_("");
    };
    cache_ = std::make_unique<client::Informer>(connection.provider(), gvr, std::move(o));
  }

  void Watch(client::EventHandler handler,
             std::function<void(const std::string&)> on_synced) override {
    cache_->AddEventHandler(std::move(handler));
    on_synced_ = std::move(on_synced);
  }
  void Start() override { cache_->Start(); }
  void Stop() override { cache_->Stop(); }
  ObjectPtr Get(const std::string& key) const override { return cache_->indexer().Get(key); }
  bool HasSynced(const std::string&) const override { return cache_->HasSynced(); }
  bool OnNamespaceMapped(const std::string&, bool) override { return false; }

  std::string ProviderKey(const std::string& consumer_key) const override {
    return PrefixedName(connection_.provider_ns(), Request::FromKey(consumer_key).name);
  }
  std::string ConsumerKey(const std::string& provider_key) const override {
    auto name = UnprefixedName(connection_.provider_ns(), Request::FromKey(provider_key).name);
    return name ? *name : "";
  }
  bool Ours(const Json& provider_object) const override {
    // A prefix match alone would take "team-a-x" of connection "team-a" for "a-x" of
    // connection "team".
    return Annotation(provider_object, apis::klutch::kClusterNamespaceAnnotation) ==
           connection_.provider_ns();
  }

  reconcile::Step Place(const Request& consumer, bool, ProviderPlace& place) override {
    place.name = PrefixedName(connection_.provider_ns(), consumer.name);
    return reconcile::Continue();
  }
  void ToProvider(Json& object, const ProviderPlace&) const override {
    InjectClusterNamespace(object, connection_.provider_ns(), namespace_uid_);
  }
  void ToConsumer(Json& copy, const Request& consumer) const override {
    ClearClusterNamespace(copy);
    machinery::MutableMetadata(copy)["name"] = consumer.name;
  }
  Json StatusToConsumer(const Json& status, const std::string&, const std::string&) const override {
    return status;
  }

 private:
  Connection& connection_;
  const std::string namespace_uid_;
  std::function<void(const std::string&)> on_synced_;  // before cache_: outlives its thread
  std::unique_ptr<client::Informer> cache_;
};

}  // namespace

std::unique_ptr<Isolation> Isolation::ForScope(std::string_view scope, Connection& connection,
                                               const client::GroupVersionResource& gvr,
                                               const client::InformerOptions& options,
                                               std::string namespace_uid) {
  if (scope == "Cluster") {
    return std::make_unique<ClusterIsolation>(connection, gvr, options, std::move(namespace_uid));
  }
  return std::make_unique<NamespacedIsolation>(connection, gvr, options);
}

}  // namespace klutch::konnector::internal
