// The files glewlwyd (Debian's 2.7 package) needs beyond its database, shared by the sandbox's
// IdentityProvider and the tests' OidcProvider:
//  - its web app (login page) with a config.json of our own: Debian's links config.json to
//    /etc/glewlwyd/config-2.7.json, which bookworm's package installs as a directory, so glewlwyd
//    answers 404 and the login page never leaves "Loading...";
//  - the glewlwyd.conf lines that serve that copy.
// Thread-compatible (writes files).
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace klutch::sandbox {

// Copies Debian's web app to `dir` (replacing what is there; copies, not links, so the
// directory can be handed to the glewlwyd user) and writes its config.json. kInternal naming
// the path when the app is missing or a copy fails.
core::Status WriteGlewlwydWebapp(const std::filesystem::path& dir);

// The glewlwyd.conf lines (static_files_path, static_files_mime_types) serving `dir` at the
// root of the server.
std::string GlewlwydWebappConfig(const std::filesystem::path& dir);

}  // namespace klutch::sandbox
