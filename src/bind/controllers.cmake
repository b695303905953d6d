# Sources of the Control Plane side (helper-owned list; see CMakeLists.txt).
list(APPEND KLUTCH_BIND_CONTROLLER_SOURCES names.h snapshot.cc catalog.cc provision.cc backend_controllers.cc object_writes.cc export_request_reconciler.cc export_reconciler.cc service_namespace_reconciler.cc kubeconfig_reconciler.cc cluster_binding_reconciler.cc consumer_quota_reconciler.cc app_cluster_bindings.cc)
