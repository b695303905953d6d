# Patch formats (JSON patch, merge patch, strategic merge patch) and label/field selectors.
target_sources(klutch_machinery PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/json_patch.cc
  ${CMAKE_CURRENT_LIST_DIR}/merge_patch.cc
  ${CMAKE_CURRENT_LIST_DIR}/strategic_merge_patch.cc
  ${CMAKE_CURRENT_LIST_DIR}/selector.cc)

klutch_test(machinery_patch_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/json_patch_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/merge_patch_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/strategic_merge_patch_test.cc
  DEPS klutch_machinery)

klutch_test(machinery_selector_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/selector_test.cc
  DEPS klutch_machinery)

# The fuzzers compile the code under test themselves: klutch_fuzzer instruments only its own
# sources, and coverage feedback (and ASan/UBSan) must reach the parsers, not just the harness.
klutch_fuzzer(fuzz_json_patch
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_json_patch.cc ${CMAKE_CURRENT_LIST_DIR}/json_patch.cc
  DEPS klutch_machinery)
klutch_fuzzer(fuzz_merge_patch
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_merge_patch.cc ${CMAKE_CURRENT_LIST_DIR}/merge_patch.cc
  DEPS klutch_machinery)
klutch_fuzzer(fuzz_strategic_merge_patch
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_strategic_merge_patch.cc
          ${CMAKE_CURRENT_LIST_DIR}/strategic_merge_patch.cc
          ${CMAKE_CURRENT_LIST_DIR}/schema_cursor.cc
  DEPS klutch_machinery)
klutch_fuzzer(fuzz_label_selector
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_label_selector.cc ${CMAKE_CURRENT_LIST_DIR}/selector.cc
  DEPS klutch_machinery)
klutch_fuzzer(fuzz_field_selector
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_field_selector.cc ${CMAKE_CURRENT_LIST_DIR}/selector.cc
  DEPS klutch_machinery)
