#include "sandbox/glewlwyd_files.h"

#include <utility>
#include <vector>

#include "core/file.h"
#include "machinery/json.h"

namespace klutch::sandbox {
namespace {

namespace fs = std::filesystem;
constexpr char kWebapp[] = "/usr/share/glewlwyd/webapp";

}  // namespace

core::Status WriteGlewlwydWebapp(const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return core::Internal("cannot create " + dir.string() + ": " + ec.message());
  for (const auto& entry : fs::directory_iterator(kWebapp, ec)) {
    if (entry.path().filename() == "config.json") continue;
    fs::copy(entry.path(), dir / entry.path().filename(), fs::copy_options::recursive, ec);
    if (ec) return core::Internal("cannot copy " + entry.path().string() + ": " + ec.message());
  }
  if (ec || !fs::exists(dir / "login.html")) {
    return core::Internal(std::string("glewlwyd's web app is missing in ") + kWebapp +
                          " (install the glewlwyd package: make deps)");
  }
  // Only these keys are read by the login page.
  machinery::Json config = {
      {"GlewlwydUrl", "./"},
      {"ProfileUrl", "profile.html"},
      {"AdminUrl", "index.html"},
      {"LoginUrl", "login.html"},
      {"CallbackPage", "callback.html"},
      {"PasswordMinLength", 8},
      {"lang", machinery::Json::array({"en"})},
      {"defaultScheme", ""},
      {"sessionSchemes", machinery::Json::array()},
      {"register", machinery::Json::array()},
      {"register-complete", machinery::Json::array()},
      {"pattern", {{"user", machinery::Json::array()}, {"client", machinery::Json::array()}}}};
  return core::WriteFileAtomic(dir / "config.json", machinery::Dump(config),
                               fs::perms::owner_read | fs::perms::owner_write |
                                   fs::perms::group_read | fs::perms::others_read);
}

std::string GlewlwydWebappConfig(const fs::path& dir) {
  static const std::vector<std::pair<std::string, std::string>> kTypes = {
      {".html", "text/html"},
      {".css", "text/css"},
      {".js", "application/javascript"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".svg", "image/svg+xml"},
      {".ttf", "font/ttf"},
      {".eot", "application/vnd.ms-fontobject"},
      {".woff", "font/woff"},
      {".woff2", "font/woff2"}};
  std::string types;
  for (const auto& [extension, type] : kTypes) {
    if (!types.empty()) types += ",\n";
    types += "  { extension = \"" + extension + "\" mime_type = \"" + type + "\" compress = 0 }";
  }
  return "static_files_path=\"" + dir.string() + "/\"\nstatic_files_mime_types = (\n" + types +
         "\n)\n";
}

}  // namespace klutch::sandbox
