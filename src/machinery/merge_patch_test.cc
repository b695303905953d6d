#include "machinery/merge_patch.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "test/support/json_text.h"

namespace klutch::machinery::merge_patch_test {
namespace {

using fixture::J;

// RFC 7386 Appendix A, "Example Test Cases": original, patch, result.
TEST(ApplyMergePatch, Rfc7386AppendixA) {
  struct Case {
    const char* original;
    const char* patch;
    const char* result;
  } cases[] = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", R"(null)", R"(null)"},
      {R"({"a":"foo"})", R"("bar")", R"("bar")"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ApplyMergePatch(J(c.original), J(c.patch)), J(c.result))
        << c.original << " + " << c.patch;
  }
}

// RFC 7386 §3, the worked example.
TEST(ApplyMergePatch, Rfc7386Section3Example) {
  Json target = J(R"({"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},
                      "tags":["example","sample"],"content":"This will be unchanged"})");
  Json patch = J(R"({"title":"Hello!","phoneNumber":"+01-123-456-7890",
                     "author":{"familyName":null},"tags":["example"]})");
  Json want = J(R"({"title":"Hello!","author":{"givenName":"John"},"tags":["example"],
                    "content":"This will be unchanged","phoneNumber":"+01-123-456-7890"})");
  EXPECT_EQ(ApplyMergePatch(target, patch), want);
}

TEST(ApplyMergePatch, KeepsNullsInsideArraysAndLeavesTheTargetAlone) {
  Json target = J(R"({"a":{"b":1}})");
  Json patch = J(R"({"l":[{"x":null},null],"a":{"c":{"d":null,"e":2}}})");
  EXPECT_EQ(ApplyMergePatch(target, patch),
            J(R"({"a":{"b":1,"c":{"e":2}},"l":[{"x":null},null]})"));
  EXPECT_EQ(target, J(R"({"a":{"b":1}})"));
}

TEST(CreateMergePatch, SmallestPatch) {
  struct Case {
    const char* original;
    const char* modified;
    const char* patch;
  } cases[] = {
      {R"({"a":1,"b":2})", R"({"a":1,"b":2})", R"({})"},
      {R"({"a":1,"b":2})", R"({"a":1})", R"({"b":null})"},
      {R"({"a":1})", R"({"a":1,"c":[1,2]})", R"({"c":[1,2]})"},
      {R"({"m":{"x":1,"y":2},"k":"v"})", R"({"m":{"x":1,"y":3},"k":"v"})", R"({"m":{"y":3}})"},
      {R"({"m":{"x":1}})", R"({"m":{}})", R"({"m":{"x":null}})"},
      {R"({"l":[1,2,3]})", R"({"l":[1,2]})", R"({"l":[1,2]})"},  // arrays replaced wholesale
      {R"({"a":{"b":1}})", R"({"a":"s"})", R"({"a":"s"})"},
      {R"({"a":"s"})", R"({"a":{"b":1}})", R"({"a":{"b":1}})"},
      {R"([1])", R"([1])", R"([1])"},  // a non-object patch must carry the value
      {R"({"a":1})", R"([1])", R"([1])"},
      {R"("x")", R"({"a":1})", R"({"a":1})"},
      {R"({"a":1})", R"(null)", R"(null)"},
  };
  for (const Case& c : cases) {
    Json patch = CreateMergePatch(J(c.original), J(c.modified));
    EXPECT_EQ(patch, J(c.patch)) << c.original << " -> " << c.modified;
    EXPECT_EQ(ApplyMergePatch(J(c.original), patch), J(c.modified))
        << c.original << " -> " << c.modified;
  }
}

// Random documents whose objects have no null members (the ones RFC 7386 can express).
class DocumentGenerator {
 public:
  explicit DocumentGenerator(uint32_t seed) : rng_(seed) {}

  Json Value(int depth) {
    int kind = Pick(depth > 3 ? 4 : 7);
    switch (kind) {
      case 0:
        return nullptr;
      case 1:
        return Pick(2) == 0;
      case 2:
        return Pick(5);
      case 3:
        return std::string(1, static_cast<char>('a' + Pick(3)));
      case 4:
      case 5:
        return Object(depth + 1);
      default: {
        Json array = Json::array();
        for (int i = Pick(3); i > 0; --i) array.push_back(Value(depth + 1));
        return array;
      }
    }
  }

  Json Object(int depth) {
    Json object = Json::object();
    for (int i = Pick(4); i > 0; --i) {
      Json v = Value(depth);
      if (!v.is_null()) object[std::string(1, static_cast<char>('k' + Pick(4)))] = std::move(v);
    }
    return object;
  }

  // A variation of `doc`: some members changed, removed or added.
  Json Mutate(const Json& doc, int depth) {
    if (!doc.is_object() || Pick(6) == 0) return Pick(2) == 0 ? doc : Value(depth);
    Json out = Json::object();
    for (const auto& [key, value] : doc.items()) {
      int action = Pick(4);
      if (action == 0) continue;  // removed
      Json v = action == 1 ? Mutate(value, depth + 1) : value;
      if (!v.is_null()) out[key] = std::move(v);
    }
    if (Pick(3) == 0) {
      Json v = Value(depth + 1);
      if (!v.is_null()) out[std::string(1, static_cast<char>('k' + Pick(5)))] = std::move(v);
    }
    return out;
  }

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::mt19937 rng_;
};

TEST(CreateMergePatch, RoundTripsRandomDocuments) {
  DocumentGenerator gen(20240611);
  int non_trivial = 0;
  for (int i = 0; i < 2000; ++i) {
    Json original = gen.Object(0);
    Json modified = gen.Mutate(original, 0);
    Json patch = CreateMergePatch(original, modified);
    ASSERT_EQ(ApplyMergePatch(original, patch), modified)
        << "original " << Dump(original) << "\nmodified " << Dump(modified) << "\npatch "
        << Dump(patch);
    // Smallest: no member of an object patch is a no-op.
    if (patch.is_object() && original.is_object()) {
      for (const auto& [key, value] : patch.items()) {
        auto it = original.find(key);
        ASSERT_FALSE(it != original.end() && *it == value)
            << "redundant member " << key << " in " << Dump(patch);
        ASSERT_FALSE(it == original.end() && value.is_null())
            << "deletes absent member " << key << " in " << Dump(patch);
      }
      if (!patch.empty()) ++non_trivial;
    }
    ASSERT_EQ(CreateMergePatch(original, original), Json::object());
  }
  EXPECT_GT(non_trivial, 500);  // the generator really produces differences
}

}  // namespace
}  // namespace klutch::machinery::merge_patch_test
