# Tests of the Control Plane side (helper-owned; see CMakeLists.txt).
klutch_test(bind_unit_test SOURCES bind_unit_test.cc manifests_test.cc
  DEPS klutch_bind klutch_test_support LABEL fast)
klutch_test(bind_controllers_test SOURCES controllers_test.cc
  DEPS klutch_bind klutch_test_cluster LABEL fast)
