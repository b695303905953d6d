// Isolation: where the bound objects of one export live on the provider (bind-protocol.md
// §4.9-§4.12), chosen once when an ExportSyncer starts, by the export's scope.
//   - Namespaced: a consumer namespace maps to the provider namespace the provider assigns
//     through an APIServiceNamespace (asked for on the first object); names stay.
//   - Cluster: every consumer shares the provider's cluster scope; names carry the connection's
//     cluster namespace as prefix, with the cluster-namespace annotation and a Namespace owner.
// A strategy answers how keys and names map both ways, which provider objects are this
// connection's, and owns the provider cache that lists them (one informer per mapped namespace,
// or one cluster-wide). Model for the shape: kube-bind's konnector isolation strategies.
// Thread-safe once started; Watch() before Start().
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "client/informer.h"
#include "konnector/context.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class Connection;

// Where one consumer object goes on the provider ("" namespace for cluster-scoped objects).
struct ProviderPlace {
  std::string ns;
  std::string name;
  std::string Key() const { return ns.empty() ? name : ns + "/" + name; }
};

class Isolation {
 public:
  virtual ~Isolation() = default;

  // The strategy for an export of `scope` ("Cluster" or "Namespaced") of resource `gvr`;
  // `namespace_uid` is the provider namespace's uid (cluster-scoped exports only).
  static std::unique_ptr<Isolation> ForScope(std::string_view scope, Connection& connection,
                                             const client::GroupVersionResource& gvr,
                                             const client::InformerOptions& options,
                                             std::string namespace_uid);

  // The provider cache. Until a provider cache has listed, the spec reconciler skips consumer
  // objects whose copies it would hold; `on_synced` is then called once, on the cache's thread,
  // with the consumer namespace of those objects: per mapped provider namespace (namespaced),
  // or "" for all of them, which are cluster-scoped (cluster).
  virtual void Watch(client::EventHandler handler,
                     std::function<void(const std::string& consumer_ns)> on_synced) = 0;
  virtual void Start() = 0;
  virtual void Stop() = 0;
  virtual client::ObjectPtr Get(const std::string& provider_key) const = 0;
  // True when the cache that would hold `provider_key` has listed.
  virtual bool HasSynced(const std::string& provider_key) const = 0;
  // A consumer namespace was mapped to provider namespace `pns` ("" while unassigned) or
  // unmapped; true when the consumer objects of that namespace must be synced again.
  virtual bool OnNamespaceMapped(const std::string& pns, bool deleted) = 0;

  // The provider key of consumer key `consumer_key`; "" when its namespace is not mapped.
  virtual std::string ProviderKey(const std::string& consumer_key) const = 0;
  // The consumer key of provider key `provider_key`; "" when not ours.
  virtual std::string ConsumerKey(const std::string& provider_key) const = 0;
  // False for a provider object of another connection.
  virtual bool Ours(const Json& provider_object) const = 0;

  // Where consumer object `consumer` goes: continues with `place` set, or ends the pass (Done)
  // while its namespace has no provider namespace yet, after asking the provider for one when
  // `request_namespace` (its events bring the object back).
  virtual reconcile::Step Place(const reconcile::Request& consumer, bool request_namespace,
                                ProviderPlace& place) = 0;
  // Sets what places `object` (named as the consumer names it) at `place` on the provider.
  virtual void ToProvider(Json& object, const ProviderPlace& place) const = 0;
  // Undoes ToProvider on `copy` (a CleanCopy of a provider object) for consumer `consumer`.
  virtual void ToConsumer(Json& copy, const reconcile::Request& consumer) const = 0;
  // A provider object's status as the consumer reads it, in the consumer's namespace names.
  virtual Json StatusToConsumer(const Json& status, const std::string& pns,
                                const std::string& cns) const = 0;
};

}  // namespace klutch::konnector::internal
