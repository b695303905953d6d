# OpenAPI v2 protobuf encoding (openapi_v2.h): gnostic's openapi.v2.Document for /openapi/v2.
target_sources(klutch_machinery PRIVATE ${CMAKE_CURRENT_LIST_DIR}/openapi_v2.cc)

klutch_test(machinery_openapi_v2_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/openapi_v2_test.cc
  DEPS klutch_machinery)

# Real kubectl binaries reading the encoded document from a small HTTP server on 127.0.0.1.
klutch_test(machinery_openapi_v2_kubectl_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/openapi_v2_kubectl_test.cc
  DEPS klutch_machinery klutch_http klutch_test_support
  LABEL slow)

# The encoder is compiled into the fuzzer itself so that libFuzzer's coverage instrumentation
# sees it (the library is built without -fsanitize=fuzzer).
klutch_fuzzer(fuzz_openapi_v2
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_openapi_v2.cc ${CMAKE_CURRENT_LIST_DIR}/openapi_v2.cc
  DEPS klutch_machinery)
