# Helpers that give every module the same shape: a library named klutch_<folder>, its tests
# beside it, warnings and sanitizers applied once here.

include(${CMAKE_CURRENT_LIST_DIR}/TestCosts.cmake)

set(KLUTCH_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers -Wnon-virtual-dtor
    -Wimplicit-fallthrough)
# Modules whose code still puts GUARDED_BY on std::mutex members (libstdc++'s mutex is no
# capability clang knows, so -Wthread-safety-attributes rejects those annotations) until they
# move to core::Mutex (core/sync.h). Under clang their headers are read as system headers, which
# mutes warnings inside them, and their own sources skip the attribute check.
# scripts/check-clang.py (ctest thread_safety_check) reads this list and skips their sources.
# Empty: every module uses core::Mutex now. Keep it that way; new code uses core/sync.h.
set(KLUTCH_THREAD_SAFETY_PENDING)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  list(APPEND KLUTCH_WARNINGS -Wthread-safety)
  foreach(module ${KLUTCH_THREAD_SAFETY_PENDING})
    list(APPEND KLUTCH_WARNINGS --system-header-prefix=${module}/)
  endforeach()
endif()
if(KLUTCH_WERROR)
  list(APPEND KLUTCH_WARNINGS -Werror)
endif()

function(klutch_apply_common target)
  target_compile_options(${target} PRIVATE ${KLUTCH_WARNINGS})
  # In a unity batch every source is an included file, and GCC then warns of each class in it
  # with a member of a file-local type (the pattern Impl classes use): noise there.
  if(KLUTCH_UNITY AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  cmake_path(GET CMAKE_CURRENT_SOURCE_DIR FILENAME folder)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND folder IN_LIST KLUTCH_THREAD_SAFETY_PENDING)
    target_compile_options(${target} PRIVATE -Wno-thread-safety-attributes)
  endif()
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  if(KLUTCH_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()

# klutch_library(<name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
function(klutch_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(klutch_${name} STATIC ${ARG_SOURCES})
  klutch_apply_common(klutch_${name})
  target_link_libraries(klutch_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# What every test is compiled with; the tests' precompiled header below is compiled with it too
# (g++ uses a precompiled header only under the flags it was made with).
function(klutch_test_flags target)
  klutch_apply_common(${target})
  # Test code is compiled at -Og: at -O2 it was half of a fresh build's compile time (gtest and
  # nlohmann templates); -Og costs what -O0 does (0 to 10 % more per file). Not -O0: the linker
  # keeps the test object's copy of every inline function and template both instantiate
  # (nlohmann's serializer and lexer, std::string), so at -O0 the libraries under test ran
  # unoptimised JSON code too (compose_engine_test: 2.6 s of CPU per case at -O0, 0.9 at -Og).
  if(CMAKE_BUILD_TYPE STREQUAL "Release")
    target_compile_options(${target} PRIVATE -Og)
  endif()
  target_compile_definitions(${target} PRIVATE
    KLUTCH_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    KLUTCH_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared"
    KLUTCH_BIN_DIR="${CMAKE_BINARY_DIR}/bin")
  # gtest's usage requirements (GTEST_HAS_PTHREAD) are part of the flags.
  target_link_libraries(${target} PRIVATE GTest::gmock)
endfunction()

# One precompiled header for every test (ADR 0016): gtest, gmock, nlohmann/json and fmt are
# parsed once per build instead of once per test source, a fifth of a test source's compile
# time. Only headers of Debian packages, never a project header: editing src/ never rebuilds it.
option(KLUTCH_TEST_PCH "Compile the tests with one shared precompiled header" ON)
if(KLUTCH_TEST_PCH)
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/klutch_test_pch.cc
       CONTENT "// The owner of the tests' precompiled header (cmake/KlutchTargets.cmake).\n")
  add_library(klutch_test_pch OBJECT ${CMAKE_BINARY_DIR}/klutch_test_pch.cc)
  klutch_test_flags(klutch_test_pch)
  # Every test links klutch_core and so fmt, whose FMT_SHARED changes what fmt's headers mean:
  # the header must be made with it too.
  target_link_libraries(klutch_test_pch PRIVATE fmt::fmt)
  set_target_properties(klutch_test_pch PROPERTIES UNITY_BUILD OFF)
  target_precompile_headers(klutch_test_pch PRIVATE
    <gmock/gmock.h> <gtest/gtest.h> <nlohmann/json.hpp> <fmt/format.h> <map> <string> <vector>)
endif()

# klutch_test(<name> SOURCES ... [DEPS ...] [LABEL fast|slow] [WHOLE])
# Unit tests are labelled "fast" (the tier to run while iterating); integration and kubectl
# scenarios are "slow". Each gtest case is its own ctest test, unless WHOLE: then the binary
# is one test (for suites whose cases share one expensive fixture and run in order).
function(klutch_test name)
  cmake_parse_arguments(ARG "WHOLE" "LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL fast)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  klutch_test_flags(${name})
  # A test's sources are batched like a library's (ADR 0015): its files share the parse of the
  # module's headers and one instantiation of its templates. Two files of one test target
  # therefore never define the same file-local name.
  if(KLUTCH_TEST_PCH)
    target_precompile_headers(${name} REUSE_FROM klutch_test_pch)
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # Tests include the header-only helpers of test/support/ (json_text.h) as "test/support/...".
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  # Long tests start first on a tree without timing history (a fresh machine): they then
  # overlap the many short ones instead of running alone at the end (cmake/TestCosts.cmake).
  klutch_test_cost(${name} ${ARG_LABEL} cost)
  if(ARG_WHOLE)
    add_test(NAME ${name} COMMAND ${name})
    set_tests_properties(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                         COST ${cost})
  else()
    # NO_PRETTY_VALUES: a ctest name is the gtest name (Suite.Test/case_name), never with the
    # printed parameter, which for a struct is its bytes and changes per run; parameterized
    # suites give readable names instead (test/support/param_name.h).
    gtest_discover_tests(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                         COST ${cost} DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES)
  endif()
endfunction()

# With KLUTCH_FUZZ every target is compiled with coverage instrumentation and sanitizers, so
# the fuzzers get feedback from the libraries they exercise, not just from the harness.
if(KLUTCH_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  add_custom_target(fuzzers)
endif()

# klutch_fuzzer(<name> SOURCES ... DEPS ...): a libFuzzer target, built only with KLUTCH_FUZZ
# (`cmake --build --preset fuzz --target fuzzers`).
function(klutch_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(NOT KLUTCH_FUZZ)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  klutch_apply_common(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  add_dependencies(fuzzers ${name})
endfunction()
