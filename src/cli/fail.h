// How a `klutch` command ends on an error: "<command>: <message>" on stderr, then the exit code.
#pragma once

#include <iostream>
#include <string>
#include <string_view>

namespace klutch::cli {

inline int Fail(std::string_view command, const std::string& message, int code = 1) {
  std::cerr << command << ": " << message << "\n";
  return code;
}

}  // namespace klutch::cli
