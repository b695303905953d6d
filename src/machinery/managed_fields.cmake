# Field ownership (metadata.managedFields) and server-side apply: fieldpath.h, managed_fields.h.
target_sources(klutch_machinery PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/fieldpath.cc
  ${CMAKE_CURRENT_LIST_DIR}/managed_fields.cc)

klutch_test(machinery_managed_fields_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/fieldpath_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/managed_fields_test.cc
  DEPS klutch_machinery)

# The parser is compiled into the fuzzer itself so that libFuzzer's coverage instrumentation
# sees it (the library is built without -fsanitize=fuzzer).
klutch_fuzzer(fuzz_fieldpath
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_fieldpath.cc ${CMAKE_CURRENT_LIST_DIR}/fieldpath.cc
  DEPS klutch_machinery)
