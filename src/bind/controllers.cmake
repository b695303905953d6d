# Sources of the Control Plane side (helper-owned list; see CMakeLists.txt).
list(APPEND KLUTCH_BIND_CONTROLLER_SOURCES names.h snapshot.cc catalog.cc provision.cc backend_controllers.cc exports.cc cluster_bindings.cc app_cluster_bindings.cc)
