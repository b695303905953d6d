// libFuzzer target: compile and evaluate arbitrary expressions. Parsing must never crash,
// and evaluation of whatever compiles must end (the cost limit bounds it) without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cel/cel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto env = klutch::cel::Env::Kubernetes();
  std::string_view source(reinterpret_cast<const char*>(data), size);
  klutch::cel::CompileOptions options;
  options.variables = {"self", "oldSelf"};
  options.check_identifiers = false;
  auto program = env->Compile(source, options);
  if (!program.ok()) return 0;
  klutch::cel::MapActivation vars;
  vars.Bind("self", klutch::cel::Value::Map(
                        {{klutch::cel::Value::String("a"), klutch::cel::Value::Int(1)}}));
  klutch::cel::EvalOptions eval;
  eval.cost_limit = 100000;
  (void)(*program)->Evaluate(vars, eval);
  return 0;
}
