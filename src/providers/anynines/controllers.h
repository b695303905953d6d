// The managed-resource reconcilers of provider-anynines (data-services.md §6.2, §6.3, §6.6,
// §6.7), on the informers and clients of a Context (wired in runtime.cc).
//
// Every pass follows Crossplane's managed reconciler: pause annotation, management policies,
// the ProviderConfig (usage record, clients), finalizer and external-name, then observe the
// external resource and create, update or delete it. Failures set Synced=False with what the
// user can act on (api_client.h UserMessage) and a Warning Event, and back off from
// failure_backoff_min to poll_interval. While an operation is in flight a resource is checked
// again after fast_poll_min, doubling to fast_poll_max; in steady state after poll_interval.
// Writes after an external change (an operation key, a backup ID) do not wait for a matching
// resourceVersion, so a concurrent status write cannot make the provider forget it.
//
// Beyond upstream:
//  * ServiceInstance: brokers without the a9s `GET /instances/{id}` (404 without
//    InstanceNotFound, 405, 501) are observed through the OSB fetch `GET
//    /v2/service_instances/{id}`; the broker's failed operation description is shown; an update
//    is not repeated for the same desired state within poll_interval; organization and space
//    GUIDs and acceptsIncomplete never make an instance "not up to date".
//  * ServiceBinding: binding waits for its instance to be Ready; a 202 bind is retried (the
//    same PUT) until the broker answers with credentials; a binding the broker lost (404/410)
//    is bound again; the Secret is repaired when deleted or changed. Credential rotation: when
//    the ProviderConfig's kAnnotationMaxCredentialAge is set and the current broker binding is
//    older, a new one ("<uid>-r<n>") is created, the Secret updated in one write, and the
//    superseded binding unbound after kAnnotationCredentialGracePeriod; the binding state lives
//    in the MR's annotations (context.h), so it survives restarts; deleting the MR unbinds
//    every binding it still holds.
//  * Backup: a backup the manager reports deleted (or forgets) outside deletion is reported
//    (Ready=False), not taken again.
//  * Backup, Restore: a creation whose answer was lost (the manager crashed after taking it) is
//    adopted on the next pass instead of repeated (CreateOnce).
//  * Unknown service or plan names list what the broker's catalog offers.
//
// Thread-safe: reconcilers keep only pacing and memo state, under their own locks.
//
// One reconciler per kind, each in its own header (ManagedReconciler: the pass they share).
#pragma once

#include "providers/anynines/backup_reconciler.h"
#include "providers/anynines/managed_reconciler.h"
#include "providers/anynines/restore_reconciler.h"
#include "providers/anynines/service_binding_reconciler.h"
#include "providers/anynines/service_instance_reconciler.h"
