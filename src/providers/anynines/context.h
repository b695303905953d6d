// What the controllers of provider-anynines share: the kinds and names they use, the
// informers of the running provider, and the small helpers every reconcile pass needs
// (per-resource re-check pacing, management policies, status writes). Internal to
// src/providers.
//
// Context is built once per start of the controllers and outlives them; the free functions
// are pure. (The pacing of re-checks: pacer.h.)
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "client/informer.h"
#include "core/clock.h"
#include "providers/anynines_provider.h"
#include "reconcile/events.h"

namespace klutch::providers::anynines {

using client::GroupVersionResource;
using machinery::Json;

inline constexpr std::string_view kGroup = "dataservices.anynines.com";
inline constexpr std::string_view kApiVersion = "dataservices.anynines.com/v1";
inline const GroupVersionResource kServiceInstances{"dataservices.anynines.com", "v1",
                                                    "serviceinstances"};
inline const GroupVersionResource kServiceBindings{"dataservices.anynines.com", "v1",
                                                   "servicebindings"};
inline const GroupVersionResource kBackups{"dataservices.anynines.com", "v1", "backups"};
inline const GroupVersionResource kRestores{"dataservices.anynines.com", "v1", "restores"};
inline const GroupVersionResource kProviderConfigs{"dataservices.anynines.com", "v1",
                                                   "providerconfigs"};
inline const GroupVersionResource kProviderConfigUsages{"dataservices.anynines.com", "v1",
                                                        "providerconfigusages"};

// Labels (Crossplane's and Klutch's compositions').
inline constexpr std::string_view kLabelClaimName = "crossplane.io/claim-name";
inline constexpr std::string_view kLabelClaimNamespace = "crossplane.io/claim-namespace";
inline constexpr std::string_view kLabelInstanceType = "klutch.io/instance-type";
inline constexpr std::string_view kLabelProviderConfig = "crossplane.io/provider-config";

// Annotations: upstream's, Crossplane's, and ours (credential rotation, klutch.anynines.com).
inline constexpr std::string_view kAnnotationBackupId = "anynines.crossplane.io/backup-id";
inline constexpr std::string_view kAnnotationRestoreId = "anynines.crossplane.io/restore-id";
inline constexpr std::string_view kAnnotationBindingCreated =
    "anynines.crossplane.io/servicebinding-created";
inline constexpr std::string_view kAnnotationExternalName = "crossplane.io/external-name";
inline constexpr std::string_view kAnnotationPaused = "crossplane.io/paused";
// On the ProviderConfig: rotate binding credentials older than this (Go duration).
inline constexpr std::string_view kAnnotationMaxCredentialAge =
    "klutch.anynines.com/max-credential-age";
// On the ProviderConfig: keep a superseded broker binding this long (Go duration; default:
// the maximum age, at most one hour).
inline constexpr std::string_view kAnnotationCredentialGracePeriod =
    "klutch.anynines.com/credential-grace-period";
// On a ServiceBinding MR: the broker binding its Secret holds now, its generation (0 = the
// MR's UID, n = "<uid>-r<n>") and when it was created (RFC 3339); the bindings it replaced
// that still exist at the broker ("<id>@<time superseded>", comma-separated).
inline constexpr std::string_view kAnnotationBindingId = "klutch.anynines.com/binding-id";
inline constexpr std::string_view kAnnotationBindingGeneration =
    "klutch.anynines.com/binding-generation";
inline constexpr std::string_view kAnnotationBindingCreatedAt =
    "klutch.anynines.com/binding-created-at";
inline constexpr std::string_view kAnnotationSupersededBindings =
    "klutch.anynines.com/superseded-bindings";
// On a Backup / Restore MR while its creation request is unanswered: the highest backup /
// restore ID the manager listed before the request, so that a lost answer is adopted, not
// repeated.
inline constexpr std::string_view kAnnotationBackupPending = "klutch.anynines.com/backup-pending";
inline constexpr std::string_view kAnnotationRestorePending = "klutch.anynines.com/restore-pending";

// On a ServiceInstance MR, or on the composite resource (and so the claim) that controls it:
// "true" deletes the instance even while ServiceBindings still use it.
inline constexpr std::string_view kAnnotationDeleteInUse = "klutch.anynines.com/delete-in-use";

inline constexpr std::string_view kManagedFinalizer = "finalizer.managedresource.crossplane.io";
inline constexpr std::string_view kInUseFinalizer = "in-use.crossplane.io";
inline constexpr std::string_view kFieldManager = "klutch-provider-anynines";
inline constexpr std::string_view kConnectionSecretType = "connection.crossplane.io/v1alpha1";

// Informer index names.
inline constexpr const char* kByClaim = "claim";                     // "<ns>/<claim name>"
inline constexpr const char* kByInstanceRef = "instance-ref";        // "<ns>/<instanceName>"
inline constexpr const char* kByBackupRef = "backup-ref";            // "<ns>/<backupName>"
inline constexpr const char* kByProviderConfig = "provider-config";  // the config's name

class Connections;

struct Context {
  client::RestClient& rest;
  const core::Clock& clock;
  reconcile::EventRecorder& events;
  const AnyninesProviderOptions& options;
  Connections& connections;
  client::Informer* instances = nullptr;
  client::Informer* bindings = nullptr;
  client::Informer* backups = nullptr;
  client::Informer* restores = nullptr;
  client::Informer* configs = nullptr;
  client::Informer* usages = nullptr;
  client::Informer* secrets = nullptr;  // type connection.crossplane.io/v1alpha1 only
  // Asks the ProviderConfig controller for a health check of `name` soon (a resource found
  // its service unreachable).
  std::function<void(const std::string& name)> request_health_check;
};

struct Policies {
  bool create = true, update = true, del = true;
};
// spec.managementPolicies (Observe, Create, Update, Delete, LateInitialize, "*").
Policies PoliciesOf(const Json& mr);
// spec.deletionPolicy is Orphan.
bool Orphans(const Json& mr);
// spec.providerConfigRef.name, "default" when unset.
std::string ProviderConfigName(const Json& mr);
// "<claim-namespace label>/<claim-name label>", "" without the labels.
std::string ClaimKey(const Json& mr);
// Sets the Ready condition: True for reason Available, False otherwise.
void SetReady(Json& mr, std::string_view reason, std::string message, const core::Clock& clock);
void SetSynced(Json& mr, bool ok, std::string message, const core::Clock& clock);
// The MR's Kubernetes identity for owner references.
Json OwnerReference(const Json& mr, bool controller);
// Whether `object` has a controller ownerReference with `uid`.
bool IsControlledBy(const Json& object, const std::string& uid);

}  // namespace klutch::providers::anynines
