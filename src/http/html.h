// HTML text for the pages our servers answer with (the bind backend's pages, kubectl bind's
// login callback). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::http {

// `text` with & < > " ' written as character references (safe in element content and in
// quoted attribute values).
std::string HtmlEscape(std::string_view text);

}  // namespace klutch::http
