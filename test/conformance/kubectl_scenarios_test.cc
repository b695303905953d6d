// Runs the kubectl scenario files in test/conformance/kubectl/ against a real
// `klutch apiserver`, once per kubectl version on the machine that the suite targets.
// The file format is described in test/conformance/README.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/strings.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;

struct Expect {
  enum class Kind { kLine, kRegex, kAny };
  Kind kind = Kind::kLine;
  std::string text;
};

struct Step {
  int line = 0;
  std::string command;
  std::vector<Expect> out, err;
  int exit_code = 0;
  std::vector<std::string> only, skip;
  int timeout_seconds = 60;
};

std::string RStrip(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s;
}

// `@server <args>` lines (before the first command) add flags to `klutch apiserver`.
std::vector<std::string> ServerArgs(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> args;
  for (std::string l; std::getline(in, l);) {
    if (l.starts_with("$ ")) break;
    if (!l.starts_with("@server ")) continue;
    std::string rest = l.substr(8);
    for (auto a : core::SplitNonEmpty(rest, ' ')) args.emplace_back(a);
  }
  return args;
}

std::vector<Step> ParseScenario(const fs::path& file, std::string* error) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<Step> steps;
  std::vector<std::string> only, skip;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = RStrip(lines[i]);
    if (line.empty() || line[0] == '#') continue;
    auto list = [](std::string_view s) {
      std::vector<std::string> out;
      for (auto p : core::SplitNonEmpty(s, ',')) out.emplace_back(core::Trim(p));
      return out;
    };
    if (line.starts_with("@server ")) continue;
    if (line.starts_with("@only ")) {
      only = list(line.substr(6));
      continue;
    }
    if (line.starts_with("@skip ")) {
      skip = list(line.substr(6));
      continue;
    }
    if (line.starts_with("$ ")) {
      Step st;
      st.line = static_cast<int>(i + 1);
      st.only = std::move(only);
      st.skip = std::move(skip);
      only.clear();
      skip.clear();
      std::string cmd = line.substr(2);
      // Continuations and heredocs belong to the command.
      while (!cmd.empty() && cmd.back() == '\\' && i + 1 < lines.size()) {
        cmd.pop_back();
        cmd += "\n" + lines[++i];
      }
      std::smatch m;
      static const std::regex kHeredoc(R"(<<-?'?([A-Za-z_]+)'?)");
      if (std::regex_search(cmd, m, kHeredoc)) {
        std::string marker = m[1];
        while (i + 1 < lines.size()) {
          cmd += "\n" + lines[++i];
          if (RStrip(lines[i]) == marker) break;
        }
        // Lines after the heredoc belong to the command until a blank line or expectation.
        while (i + 1 < lines.size() && !RStrip(lines[i + 1]).empty() &&
               std::string_view("~>!?@#$").find(lines[i + 1][0]) == std::string_view::npos) {
          cmd += "\n" + lines[++i];
        }
      }
      st.command = cmd;
      steps.push_back(std::move(st));
      continue;
    }
    if (steps.empty()) {
      *error = file.string() + ":" + std::to_string(i + 1) + ": expectation before any command";
      return {};
    }
    Step& st = steps.back();
    auto add = [](std::vector<Expect>& v, std::string_view rest, bool regex) {
      if (rest == "...") {
        v.push_back({Expect::Kind::kAny, ""});
      } else {
        v.push_back({regex ? Expect::Kind::kRegex : Expect::Kind::kLine, std::string(rest)});
      }
    };
    if (line.starts_with("!~ ")) {
      add(st.err, line.substr(3), true);
    } else if (line == "!" || line.starts_with("! ")) {
      add(st.err, line.size() > 2 ? line.substr(2) : "", false);
    } else if (line.starts_with("~ ")) {
      add(st.out, line.substr(2), true);
    } else if (line == ">" || line.starts_with("> ")) {
      add(st.out, line.size() > 2 ? line.substr(2) : "", false);
    } else if (line.starts_with("? ")) {
      st.exit_code = std::stoi(line.substr(2));
    } else if (line.starts_with("@timeout ")) {
      st.timeout_seconds = std::stoi(line.substr(9));
    } else {
      *error = file.string() + ":" + std::to_string(i + 1) + ": cannot parse line: " + line;
      return {};
    }
  }
  return steps;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(RStrip(l));
  return out;
}

// Matches lines against expectations with "..." wildcards (backtracking).
bool Match(const std::vector<Expect>& want, size_t wi, const std::vector<std::string>& got,
           size_t gi) {
  if (wi == want.size()) return gi == got.size();
  const Expect& e = want[wi];
  if (e.kind == Expect::Kind::kAny) {
    for (size_t k = gi; k <= got.size(); ++k) {
      if (Match(want, wi + 1, got, k)) return true;
    }
    return false;
  }
  if (gi == got.size()) return false;
  bool ok = e.kind == Expect::Kind::kLine ? got[gi] == e.text
                                          : std::regex_match(got[gi], std::regex(e.text));
  return ok && Match(want, wi + 1, got, gi + 1);
}

std::string Render(const std::vector<Expect>& want) {
  std::string out;
  for (const auto& e : want) {
    out += e.kind == Expect::Kind::kAny ? "..."
                                        : (e.kind == Expect::Kind::kRegex ? "~ " : "") + e.text;
    out += "\n";
  }
  return out;
}

struct Case {
  std::string file;
  std::string version;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.file << " with kubectl " << c.version; }

std::vector<Case> Cases() {
  std::vector<Case> out;
  fs::path dir = fs::path(KLUTCH_SOURCE_DIR) / "test/conformance/kubectl";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".scenario") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const char* v : {"1.32", "1.27", "1.33"}) {
    for (const auto& f : files) out.push_back({f.stem().string(), v});
  }
  return out;
}

class KubectlScenario : public ::testing::TestWithParam<Case> {};

TEST_P(KubectlScenario, MatchesRealClusterOutput) {
  const Case& c = GetParam();
  fs::path kubectl = "/usr/lib/google-cloud-sdk/bin/kubectl." + c.version;
  // Every kubectl version is part of the machine (the image's Google Cloud SDK dispatcher;
  // shared/tools/fresh-machine.sh copies them in): a missing one fails, it is not skipped.
  ASSERT_TRUE(fs::exists(kubectl))
      << kubectl << " is missing: kubectl " << c.version << " is required to run this scenario";
  std::string error;
  fs::path file = fs::path(KLUTCH_SOURCE_DIR) / "test/conformance/kubectl" / (c.file + ".scenario");
  auto steps = ParseScenario(file, &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_FALSE(steps.empty());

  TempDir work("klutch-kubectl");
  std::string minor = c.version.substr(2);
  std::vector<std::string> args = {"--report-minor-version", minor};
  for (auto& a : ServerArgs(file)) args.push_back(a);
  auto server = ApiServerProcess::Start(work.path() / "server", args, &error);
  ASSERT_TRUE(server) << error;
  fs::create_directories(work.path() / "bin");
  fs::create_symlink(kubectl, work.path() / "bin/kubectl");
  std::map<std::string, std::string> env = {
      {"KUBECONFIG", server->kubeconfig().string()},
      {"KUBECACHEDIR", (work.path() / "cache").string()},
      {"HOME", work.path().string()},
      {"PATH", (work.path() / "bin").string() + ":/usr/local/bin:/usr/bin:/bin"},
      {"MANIFESTS", std::string(KLUTCH_SHARED_DIR) + "/specs/kubectl-probe/manifests"},
      {"OURS", std::string(KLUTCH_SOURCE_DIR) + "/test/conformance/kubectl/manifests"},
      {"WORK", work.path().string()},
      {"KUBE_EDITOR", std::string(KLUTCH_SHARED_DIR) + "/specs/kubectl-probe/manifests/editor.sh"},
      {"KUBECTL_VERSION", c.version},
      // Helpers every step may call (until_ok, watch_then).
      {"BASH_ENV", std::string(KLUTCH_SOURCE_DIR) + "/test/conformance/kubectl/lib.sh"},
      {"LC_ALL", "C"},
  };
  for (const Step& st : steps) {
    if (!st.only.empty() && std::find(st.only.begin(), st.only.end(), c.version) == st.only.end()) {
      continue;
    }
    if (std::find(st.skip.begin(), st.skip.end(), c.version) != st.skip.end()) continue;
    CommandResult r =
        RunShell(st.command, env, work.path(), std::chrono::seconds(st.timeout_seconds));
    std::string where = file.filename().string() + ":" + std::to_string(st.line) + " (kubectl " +
                        c.version + ")\n$ " + st.command;
    EXPECT_FALSE(r.timed_out) << where << "\ntimed out";
    EXPECT_EQ(r.exit_code, st.exit_code) << where << "\nstdout:\n" << r.out << "stderr:\n" << r.err;
    auto expand = [&](std::vector<Expect> v) {
      for (auto& e : v) {
        for (const char* var : {"MANIFESTS", "OURS", "WORK"}) {
          std::string token = std::string("$") + var;
          for (size_t pos; (pos = e.text.find(token)) != std::string::npos;) {
            std::string value = env[var];
            if (e.kind == Expect::Kind::kRegex)
              value = std::regex_replace(value, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
            e.text.replace(pos, token.size(), value);
          }
        }
      }
      return v;
    };
    const std::vector<Expect> want_out = expand(st.out), want_err = expand(st.err);
    if (!st.out.empty()) {
      EXPECT_TRUE(Match(want_out, 0, Lines(r.out), 0)) << where << "\nwant stdout:\n"
                                                       << Render(want_out) << "got stdout:\n"
                                                       << r.out << "stderr:\n"
                                                       << r.err;
    }
    if (!st.err.empty()) {
      EXPECT_TRUE(Match(want_err, 0, Lines(r.err), 0)) << where << "\nwant stderr:\n"
                                                       << Render(want_err) << "got stderr:\n"
                                                       << r.err;
    }
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "server log tail:\n"
                    << server->log().substr(
                           server->log().size() > 4000 ? server->log().size() - 4000 : 0);
      break;  // later steps depend on this one
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, KubectlScenario, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.file + "_kubectl" + info.param.version;
                           for (auto& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace klutch::testing
