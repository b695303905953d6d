# Tests of the HTTP side (see ../CMakeLists.txt; paths relative to src/bind).
# bind_web_unit_test: sealed values, wire formats, pages and the routes against the in-process
# TestCluster with a fake issuer (fast tier).
# bind_web_test: the same routes against a real OIDC provider (glewlwyd), slow tier.
klutch_test(bind_web_unit_test SOURCES web/web_unit_test.cc DEPS klutch_bind klutch_test_cluster)
klutch_test(bind_web_test SOURCES web/web_test.cc DEPS klutch_bind klutch_test_cluster LABEL slow
            TIMEOUT 180)

# The fuzzer compiles what parses untrusted input itself (no client or HTTP transport).
klutch_fuzzer(fuzz_bind_session
  SOURCES web/fuzz_bind_session.cc web/sealer.cc web/web_protocol.cc
          ${PROJECT_SOURCE_DIR}/src/http/message.cc
          ${PROJECT_SOURCE_DIR}/src/apis/klutch/binding_response.cc
          ${PROJECT_SOURCE_DIR}/src/apis/klutch/export_request.cc
  DEPS klutch_machinery OpenSSL::Crypto)

# `klutch backend` as a process (flags, serving line, HTTPS routes), slow tier.
klutch_test(bind_backend_process_test SOURCES web/web_process_test.cc
            DEPS klutch_bind klutch_test_cluster LABEL slow TIMEOUT 180)
add_dependencies(bind_backend_process_test klutch)

# The pages in Debian's Chromium (test/support/browser.h) with glewlwyd's web login and
# Klutch's own APIs; screenshots in the build's test-artifacts dir. Slow tier.
klutch_test(bind_web_browser_test SOURCES web/web_browser_test.cc
            DEPS klutch_bind klutch_compose klutch_test_cluster klutch_test_browser
            LABEL slow TIMEOUT 240)
