// Runs cel-spec's conformance files against src/cel.
//
// Each file under ../shared/conformance/cel-spec is read at run time (the data is not copied
// into this repository) and every test in it is compiled with cel::Env::Standard(), evaluated
// with its bindings and compared with its expected value (exactly: int 3 is not double 3.0;
// NaN matches NaN), its expected error, or `true` when the test names no result. Identifiers
// are checked only when the test declares a type_env and does not disable the checker. A
// compile error counts as the error an eval_error test expects; the suite only requires that
// an error happens, so message mismatches go to a debug log, cel_spec_<file>.log in the
// build directory (beside tests/), never to a failure.
//
// Tests this project does not support by design are listed with a reason in skipped.txt;
// everything else must pass. One TEST per file; a failure lists every failing test with its
// expression, the expected and the actual result. Test ids are file/section/test, with "#2",
// "#3" appended to names upstream repeats within a section.
//
// KLUTCH_CEL_RUN_SKIPPED=1 also runs the skipped tests and prints those that pass, to keep
// the skip list honest.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cel/cel.h"
#include "test/conformance/cel/conformance_value.h"
#include "test/conformance/cel/textproto.h"

namespace klutch::cel_conformance {
namespace {

using textproto::Field;
using textproto::Message;

constexpr const char* kSkipListPath = KLUTCH_SOURCE_DIR "/test/conformance/cel/skipped.txt";

const char* const kFiles[] = {"basic",        "comparisons", "conversions", "fields",
                              "integer_math", "fp_math",     "lists",       "logic",
                              "macros",       "macros2",     "parse",       "plumbing",
                              "string",       "string_ext",  "timestamps",  "optionals"};

struct SkipEntry {
  std::string reason;
  int line = 0;
};

// skipped.txt: `file/section/test: reason` or `file/section/*: reason`; `#` comments.
struct SkipList {
  std::map<std::string, SkipEntry> entries;
  std::vector<std::string> errors;
};

const SkipList& Skips() {
  static const SkipList kList = [] {
    SkipList list;
    std::ifstream in(kSkipListPath);
    if (!in) {
      list.errors.push_back(std::string("cannot read ") + kSkipListPath);
      return list;
    }
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      size_t start = line.find_first_not_of(" \t");
      if (start == std::string::npos || line[start] == '#') continue;
      size_t colon = line.find(": ");
      std::string id = line.substr(start, colon == std::string::npos ? colon : colon - start);
      std::string reason = colon == std::string::npos ? "" : line.substr(colon + 2);
      size_t slashes = std::count(id.begin(), id.end(), '/');
      if (slashes != 2 || reason.find_first_not_of(" \t") == std::string::npos) {
        list.errors.push_back("skipped.txt:" + std::to_string(number) +
                              ": expected `file/section/test: reason`, got `" + line + "`");
        continue;
      }
      if (!list.entries.emplace(id, SkipEntry{reason, number}).second) {
        list.errors.push_back("skipped.txt:" + std::to_string(number) + ": duplicate " + id);
      }
    }
    return list;
  }();
  return kList;
}

struct FileStats {
  int passed = 0;
  int failed = 0;
  int skipped = 0;
};

std::map<std::string, FileStats>& AllStats() {
  static std::map<std::string, FileStats> stats;
  return stats;
}

// Prints the per-file table and the total after all tests ran.
class SummaryEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (AllStats().empty()) return;
    FileStats total;
    std::printf("\ncel-spec conformance:\n");
    for (const auto& [file, s] : AllStats()) {
      std::printf("  %-14s passed %4d  failed %4d  skipped %4d\n", file.c_str(), s.passed, s.failed,
                  s.skipped);
      total.passed += s.passed;
      total.failed += s.failed;
      total.skipped += s.skipped;
    }
    std::printf("  %-14s passed %4d  failed %4d  skipped %4d\n", "total", total.passed,
                total.failed, total.skipped);
  }
};

[[maybe_unused]] ::testing::Environment* const kSummary =
    ::testing::AddGlobalTestEnvironment(new SummaryEnvironment);

enum class Verdict { kPass, kFail };

struct Outcome {
  Verdict verdict = Verdict::kFail;
  std::string expected;
  std::string got;
  std::string note;  // why it failed, when that is not a plain value mismatch
};

std::string Describe(const cel::Value& v) {
  return v.is_error() ? "error: " + v.error_message() : v.DebugString();
}

// The identifiers a test declares in type_env.
std::vector<std::string> DeclaredIdentifiers(const Message& test) {
  std::vector<std::string> names;
  for (const Field* decl : test.FindAll("type_env")) {
    if (!decl->is_message()) continue;
    const Message& d = decl->message();
    auto name = d.FindString("name");
    if (name && d.FindMessage("ident") != nullptr) names.push_back(*name);
  }
  return names;
}

Outcome RunTest(const Message& test, std::ostream& log, const std::string& id) {
  Outcome out;
  auto expr = test.FindString("expr");
  if (!expr) {
    out.note = "test has no expr";
    return out;
  }
  for (std::string_view option : {"disable_macros", "check_only"}) {
    if (test.FindBool(option)) {
      out.note = "harness does not support " + std::string(option);
      return out;
    }
  }
  if (auto container = test.FindString("container"); container && !container->empty()) {
    log << id << ": container '" << *container << "' ignored\n";
  }

  // The expectation: a value, an error, or (no matcher) true.
  const Message* expected_value = test.FindMessage("value");
  bool expect_error = test.Find("eval_error") != nullptr || test.Find("any_eval_errors") != nullptr;
  for (std::string_view matcher : {"typed_result", "unknown", "any_unknowns"}) {
    if (test.Find(matcher) != nullptr) {
      out.note = "harness does not support result matcher " + std::string(matcher);
      return out;
    }
  }
  cel::Value want = cel::Value::Bool(true);
  if (expected_value != nullptr) {
    auto converted = ToCelValue(*expected_value);
    if (!converted.ok()) {
      out.note = "bad expected value: " + converted.status().message();
      return out;
    }
    if (!converted->unsupported.empty()) {
      out.note = "expected value not expressible: " + converted->unsupported;
      return out;
    }
    want = converted->value;
  }
  out.expected = expect_error ? "an error" : Describe(want);
  std::vector<std::string> expected_messages;
  if (const Message* err = test.FindMessage("eval_error")) {
    for (const Field* e : err->FindAll("errors")) {
      if (e->is_message())
        expected_messages.push_back(e->message().FindString("message").value_or(""));
    }
  }

  cel::MapActivation vars;
  for (const Field* binding : test.FindAll("bindings")) {
    if (!binding->is_message()) continue;
    auto key = binding->message().FindString("key");
    const Message* expr_value = binding->message().FindMessage("value");
    const Message* value = expr_value != nullptr ? expr_value->FindMessage("value") : nullptr;
    if (!key || value == nullptr) {
      out.note = "binding is not a plain value (error or unknown bindings are unsupported)";
      return out;
    }
    auto converted = ToCelValue(*value);
    if (!converted.ok()) {
      out.note = "bad binding " + *key + ": " + converted.status().message();
      return out;
    }
    if (!converted->unsupported.empty()) {
      out.note = "binding " + *key + " not expressible: " + converted->unsupported;
      return out;
    }
    vars.Bind(*key, converted->value);
  }

  cel::CompileOptions options;
  options.variables = DeclaredIdentifiers(test);
  // Declared identifiers are checked, as cel-go's checker would, unless the test disables
  // the checker.
  options.check_identifiers = test.Find("type_env") != nullptr && !test.FindBool("disable_check");
  std::string error_message;
  cel::Value got;
  try {
    auto program = cel::Env::Standard()->Compile(*expr, options);
    if (!program.ok()) {
      error_message = "compile error: " + program.status().message();
      got = cel::Value::MakeError(error_message);
    } else {
      got = (*program)->Evaluate(vars).value;
      if (got.is_error()) error_message = got.error_message();
    }
  } catch (const std::exception& e) {
    out.got = std::string("exception: ") + e.what();
    out.note = "src/cel threw";
    return out;
  }
  out.got = got.is_error() ? error_message : Describe(got);

  if (expect_error) {
    if (!got.is_error()) return out;
    out.verdict = Verdict::kPass;
    bool matched = expected_messages.empty();
    for (const std::string& m : expected_messages) {
      if (error_message.find(m) != std::string::npos) matched = true;
    }
    if (!matched) {
      log << id << ": error message differs\n  expr: " << *expr << "\n  want: ";
      for (const std::string& m : expected_messages) log << "'" << m << "' ";
      log << "\n  got:  '" << error_message << "'\n";
    }
    return out;
  }
  if (got.is_error()) return out;
  if (ExactlyEqual(want, got)) out.verdict = Verdict::kPass;
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void RunFile(const std::string& file) {
  const SkipList& skips = Skips();
  for (const std::string& e : skips.errors) ADD_FAILURE() << e;
  std::string path = std::string(KLUTCH_SHARED_DIR "/conformance/cel-spec/") + file + ".textproto";
  std::string text = ReadFile(path);
  ASSERT_FALSE(text.empty()) << "cannot read " << path;
  auto parsed = textproto::Parse(text);
  ASSERT_TRUE(parsed.ok()) << path << ": " << parsed.status().message();

  bool run_skipped = std::getenv("KLUTCH_CEL_RUN_SKIPPED") != nullptr;
  // Beside the test binary's build output, never in the source tree.
  std::ofstream log(std::string(KLUTCH_BIN_DIR) + "/../cel_spec_" + file + ".log");
  FileStats& stats = AllStats()[file];
  stats = FileStats();
  std::set<std::string> used_skips;
  std::ostringstream failures;
  std::set<std::string> seen;
  for (const Field* section_field : parsed->FindAll("section")) {
    if (!section_field->is_message()) continue;
    const Message& section = section_field->message();
    std::string section_name = section.FindString("name").value_or("");
    for (const Field* test_field : section.FindAll("test")) {
      if (!test_field->is_message()) continue;
      const Message& test = test_field->message();
      std::string id = file + "/" + section_name + "/" + test.FindString("name").value_or("");
      // Upstream repeats a few names within a section; later ones get "#2", "#3", ...
      for (int n = 2; !seen.insert(id).second; ++n) {
        id = file + "/" + section_name + "/" + test.FindString("name").value_or("") + "#" +
             std::to_string(n);
      }
      std::string skip_key;
      for (const std::string& key : {id, file + "/" + section_name + "/*"}) {
        if (skips.entries.contains(key)) skip_key = key;
      }
      if (!skip_key.empty()) {
        used_skips.insert(skip_key);
        ++stats.skipped;
        if (run_skipped) {
          std::ostringstream ignored;
          if (RunTest(test, ignored, id).verdict == Verdict::kPass) {
            std::printf("skipped test passes: %s\n", id.c_str());
          }
        }
        continue;
      }
      Outcome outcome = RunTest(test, log, id);
      if (outcome.verdict == Verdict::kPass) {
        ++stats.passed;
        continue;
      }
      ++stats.failed;
      failures << "\n"
               << id << "\n  expr:     " << test.FindString("expr").value_or("")
               << "\n  expected: " << outcome.expected << "\n  got:      " << outcome.got;
      if (!outcome.note.empty()) failures << "\n  note:     " << outcome.note;
    }
  }
  // A skip entry that matches nothing is stale (renamed or removed upstream).
  for (const auto& [key, entry] : skips.entries) {
    if (key.starts_with(file + "/") && !used_skips.contains(key)) {
      ADD_FAILURE() << "skipped.txt:" << entry.line << ": " << key << " matches no test";
    }
  }
  std::printf("%s: %d passed, %d failed, %d skipped\n", file.c_str(), stats.passed, stats.failed,
              stats.skipped);
  EXPECT_EQ(stats.failed, 0) << stats.failed << " failing test(s) in " << file << ":"
                             << failures.str();
}

#define KLUTCH_CEL_SPEC_FILE(name) \
  TEST(CelSpec, name) { RunFile(#name); }

KLUTCH_CEL_SPEC_FILE(basic)
KLUTCH_CEL_SPEC_FILE(comparisons)
KLUTCH_CEL_SPEC_FILE(conversions)
KLUTCH_CEL_SPEC_FILE(fields)
KLUTCH_CEL_SPEC_FILE(integer_math)
KLUTCH_CEL_SPEC_FILE(fp_math)
KLUTCH_CEL_SPEC_FILE(lists)
KLUTCH_CEL_SPEC_FILE(logic)
KLUTCH_CEL_SPEC_FILE(macros)
KLUTCH_CEL_SPEC_FILE(macros2)
KLUTCH_CEL_SPEC_FILE(parse)
KLUTCH_CEL_SPEC_FILE(plumbing)
KLUTCH_CEL_SPEC_FILE(string)
KLUTCH_CEL_SPEC_FILE(string_ext)
KLUTCH_CEL_SPEC_FILE(timestamps)
KLUTCH_CEL_SPEC_FILE(optionals)

// Every skip entry names one of the files above.
TEST(CelSpec, SkipListNamesKnownFiles) {
  const SkipList& skips = Skips();
  EXPECT_TRUE(skips.errors.empty());
  for (const auto& [key, entry] : skips.entries) {
    std::string file = key.substr(0, key.find('/'));
    bool known = false;
    for (const char* f : kFiles) known = known || file == f;
    EXPECT_TRUE(known) << "skipped.txt:" << entry.line << ": unknown file " << file;
  }
}

}  // namespace
}  // namespace klutch::cel_conformance
