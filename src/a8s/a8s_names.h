// The a8s APIs `klutch operator` serves (deploy/operator/crds) and the names it gives what it
// makes. Constants only.
#pragma once

#include <string_view>

#include "client/dynamic.h"

namespace klutch::a8s {

inline const client::GroupVersionResource kPostgresqls{"postgresql.anynines.com", "v1beta3",
                                                       "postgresqls"};
inline const client::GroupVersionResource kServiceBindings{"servicebindings.anynines.com",
                                                           "v1beta3", "servicebindings"};
inline const client::GroupVersionResource kBackups{"backups.anynines.com", "v1beta3", "backups"};
inline const client::GroupVersionResource kRestores{"backups.anynines.com", "v1beta3", "restores"};

inline constexpr std::string_view kPostgresqlApiVersion = "postgresql.anynines.com/v1beta3";
inline constexpr std::string_view kPostgresqlGroup = "postgresql.anynines.com";

// Klutch's PostgreSQL claims (the a8s compositions name the Postgresql after its claim).
inline const client::GroupVersionResource kPostgresqlInstanceClaims{"anynines.com", "v1",
                                                                    "postgresqlinstances"};
// On a Postgresql or its claim: delete it even while ServiceBindings use it (ADR 0014).
inline constexpr std::string_view kDeleteInUseAnnotation = "klutch.anynines.com/delete-in-use";

// Kept on every object the operator serves until what it made for the object is gone.
inline constexpr std::string_view kFinalizer = "operator.klutch.anynines.com/cleanup";
// The database every instance has, which bindings use (a8s' default database name).
inline constexpr std::string_view kDatabase = "a9s_apps_default_db";
// A binding's Secret: <binding name> + this suffix, in the binding's namespace.
inline constexpr std::string_view kBindingSecretSuffix = "-service-binding";

// status.clusterStatus values.
inline constexpr std::string_view kRunning = "Running";
inline constexpr std::string_view kNotRunning = "NotRunning";

}  // namespace klutch::a8s
