# Kubernetes protobuf request-body decoding (protobuf.h).
target_sources(klutch_machinery PRIVATE ${CMAKE_CURRENT_LIST_DIR}/protobuf.cc)

klutch_test(machinery_protobuf_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/protobuf_test.cc
  DEPS klutch_machinery)

# The decoder is compiled into the fuzzer itself so that libFuzzer's coverage instrumentation
# sees it (the library is built without -fsanitize=fuzzer); the linker then never pulls the
# library's copy.
klutch_fuzzer(fuzz_protobuf
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_protobuf.cc ${CMAKE_CURRENT_LIST_DIR}/protobuf.cc
  DEPS klutch_machinery)
