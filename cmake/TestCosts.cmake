# What each long test costs, for ctest's scheduling: the COST property of every ctest test a
# binary below registers, in seconds (its longest case, measured in a full `ctest --preset dev`
# run; docs/performance.md). Without timing history (Testing/Temporary/CTestCostData.txt, which
# a fresh machine has not) `ctest -j` starts tests in decreasing COST, so the long ones start
# first and overlap the many short ones instead of one of them running alone at the end.
# Unlisted tests cost 2 (label slow) or 1 (fast). Re-measure when a test's time changes by
# much: `ctest --preset dev` prints every test's seconds.
set(KLUTCH_TEST_COSTS
  # e2e and integration binaries (klutch_test)
  sandbox_e2e_test 150
  broker_e2e_test 110
  konnector_chaos_test 40
  bind_web_browser_test 35
  konnector_e2e_test 23
  konnector_runner_test 21
  broker_instances_test 20
  kubectl_scenarios_test 14
  browser_login_test 14
  kubectl_bind_e2e_test 13
  oidc_auth_test 12
  compose_engine_test 8
  bind_konnector_test 9
  manager_e2e_test 7
  auth_test 5
  providers_anynines_test 4
  osb_conformance_test 4
  informer_test 4
  bind_controllers_test 4
  # benchmark smoke runs (test/bench)
  broker_bench_smoke 25
  konnector_bench_smoke 6
  bind_bench_smoke 19
  manager_bench_smoke 5
  apiserver_bench_smoke 6
  informer_bench_smoke 4
)

# klutch_test_cost(<test or binary name> <label> <out_var>): its COST from the table above.
function(klutch_test_cost name label out_var)
  list(FIND KLUTCH_TEST_COSTS ${name} i)
  if(i GREATER_EQUAL 0)
    math(EXPR i "${i} + 1")
    list(GET KLUTCH_TEST_COSTS ${i} cost)
  elseif(label STREQUAL "slow")
    set(cost 2)
  else()
    set(cost 1)
  endif()
  set(${out_var} ${cost} PARENT_SCOPE)
endfunction()
