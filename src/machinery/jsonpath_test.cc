// JsonPath against client-go's util/jsonpath behaviour, as kube-apiserver uses it for CRD
// printer columns: field lexing with backslash escapes, brackets, filters, and what counts
// as an evaluation error.
#include "machinery/jsonpath.h"

#include <gtest/gtest.h>

namespace klutch::machinery::jsonpath_test {
namespace {

const Json kDoc = Json::parse(R"({
  "metadata": {
    "name": "pg",
    "annotations": {
      "crossplane.io/external-name": "pg-1234",
      "bind.klutch.anynines.com/resources": "all",
      "a": {"b": "nested"},
      "a.b": "dotted",
      "": "empty key"
    }
  },
  "spec": {"size": 3, "ratio": 0.5, "tags": ["a", "b", "c", "d"], "empty": [], "nothing": null},
  "status": {"conditions": [
    {"type": "Synced", "status": "False", "count": 1},
    {"type": "Ready", "status": "True", "count": 2, "reason": "Available"}
  ]}
})");

std::vector<Json> Eval(std::string_view expr, const Json& doc = kDoc) {
  auto p = JsonPath::Compile(expr);
  EXPECT_TRUE(p.ok()) << expr << ": " << p.status().ToString();
  std::vector<Json> out;
  if (!p.ok()) return out;
  for (const Json* v : p->Evaluate(doc)) out.push_back(*v);
  return out;
}

using Values = std::vector<Json>;

TEST(JsonPath, FieldNamesTakeBackslashEscapesAndDropEveryBackslash) {
  // The managed-resource CRDs' EXTERNAL-NAME column.
  EXPECT_EQ(Eval(R"(.metadata.annotations.crossplane\.io/external-name)"), Values{"pg-1234"});
  // The bind CRD's column: `bind.klutch` then `anynines.com/resources`, so nothing here.
  EXPECT_EQ(Eval(R"(.metadata.annotations.bind\.klutch.\anynines\.com/resources)"), Values{});
  const Json bind_doc =
      Json::parse(R"({"metadata":{"annotations":{"bind.klutch":{"anynines.com/resources":"x"}}}})");
  EXPECT_EQ(Eval(R"(.metadata.annotations.bind\.klutch.\anynines\.com/resources)", bind_doc),
            Values{"x"});
  EXPECT_EQ(Eval(R"(.metadata.annotations.a\.b)"), Values{"dotted"});
  EXPECT_EQ(Eval(".metadata.annotations.a.b"), Values{"nested"});
  // Any character but a terminator belongs to the name.
  EXPECT_EQ(Eval(R"({.metadata.annotations.crossplane\.io/external-name})"), Values{"pg-1234"});
  EXPECT_EQ(Eval(".metadata.annotations.crossplane"), Values{});
}

TEST(JsonPath, BracketsSelectIndexesSlicesUnionsAndKeys) {
  EXPECT_EQ(Eval(".spec.tags[1]"), Values{"b"});
  EXPECT_EQ(Eval(".spec.tags[-1]"), Values{"d"});
  EXPECT_EQ(Eval(".spec.tags[1:3]"), (Values{"b", "c"}));
  EXPECT_EQ(Eval(".spec.tags[::2]"), (Values{"a", "c"}));
  EXPECT_EQ(Eval(".spec.tags[-2:]"), (Values{"c", "d"}));
  EXPECT_EQ(Eval(".spec.tags[*]"), (Values{"a", "b", "c", "d"}));
  EXPECT_EQ(Eval(".spec.tags[]"), Values{"a"});  // client-go reads [] as [0]
  EXPECT_EQ(Eval(".spec.tags[0, 3]"), (Values{"a", "d"}));
  EXPECT_EQ(Eval(".spec['size','ratio']"), (Values{3, 0.5}));
  // A quoted key is read again as a field path, as client-go does.
  EXPECT_EQ(Eval(".metadata.annotations['a.b']"), Values{"nested"});
  EXPECT_EQ(Eval(R"(.metadata.annotations['a\.b'])"), Values{"dotted"});
  EXPECT_EQ(Eval(".metadata['annotations']['crossplane\\.io/external-name']"), Values{"pg-1234"});
}

TEST(JsonPath, WildcardsAndRecursiveDescent) {
  EXPECT_EQ(Eval(".spec.*").size(), 5u);
  EXPECT_EQ(Eval("..status"),
            (Values{kDoc["status"], "False", "True"}));  // every object and array, in order
  EXPECT_EQ(Eval("..type"), (Values{"Synced", "Ready"}));
  EXPECT_EQ(Eval("{.}"), Values{kDoc});
  EXPECT_EQ(Eval("$.metadata.name"), Values{"pg"});
}

TEST(JsonPath, FiltersCompareLikeGoTemplates) {
  EXPECT_EQ(Eval(".status.conditions[?(@.type=='Ready')].status"), Values{"True"});
  EXPECT_EQ(Eval(".status.conditions[?(@.type==\"Synced\")].status"), Values{"False"});
  EXPECT_EQ(Eval(".status.conditions[?(@.type != 'Ready')].type"), Values{"Synced"});
  EXPECT_EQ(Eval(".status.conditions[?(@.count>1)].type"), Values{"Ready"});
  EXPECT_EQ(Eval(".status.conditions[?(@.count<=1)].type"), Values{"Synced"});
  EXPECT_EQ(Eval(".status.conditions[?(@.reason)].type"), Values{"Ready"});
  EXPECT_EQ(Eval(".status.conditions[?(@.type=='Re)ady')].type"), Values{});
  // Elements without the field are skipped; comparing different kinds is an error, which
  // makes the whole path select nothing.
  EXPECT_EQ(Eval(".status.conditions[?(@.reason=='Available')].type"), Values{"Ready"});
  EXPECT_EQ(Eval(".status.conditions[?(@.count=='1')].type"), Values{});
  EXPECT_EQ(Eval(".status.conditions[?(@.count==1.0)].type"), Values{});
}

TEST(JsonPath, EvaluationErrorsSelectNothing) {
  EXPECT_EQ(Eval(".spec.tags[4]"), Values{});     // out of range
  EXPECT_EQ(Eval(".spec.size[0]"), Values{});     // not an array
  EXPECT_EQ(Eval(".spec[?(@.x)]"), Values{});     // filtering an object
  EXPECT_EQ(Eval(".spec.nothing[0]"), Values{});  // null is skipped, not an error
  EXPECT_EQ(Eval(".spec.empty[0:0]"), Values{});
  EXPECT_EQ(Eval(".spec.missing.deeper"), Values{});  // missing keys are allowed
  EXPECT_EQ(Eval(".metadata.annotations."), Values{"empty key"});
}

TEST(JsonPath, MalformedExpressionsAreBadRequests) {
  for (const char* expr :
       {".spec[", "[-", "[99999999999999999999]", ".spec.tags[a]", ".spec.tags[1:x]",
        ".a[?(@.b==1)", ".a[?(@.b==1)x", ".a[?(@.b=!1)]", "....a", ".a{", ".a 'text'", ".a 12",
        "metadata.name", "{.a", ".a[?(@.b=='x\\q')]", ".a\n.b"}) {
    auto p = JsonPath::Compile(expr);
    EXPECT_FALSE(p.ok()) << expr;
    if (!p.ok()) {
      EXPECT_EQ(p.status().reason(), core::Reason::kBadRequest) << expr;
    }
  }
  auto p = JsonPath::Compile(".spec.tags[1:x]");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "invalid JSONPath \".spec.tags[1:x]\" at 10: invalid array "
            "index 1:x");
}

}  // namespace
}  // namespace klutch::machinery::jsonpath_test
