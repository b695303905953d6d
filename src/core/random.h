// Randomness for identifiers: UUIDs for metadata.uid, suffixes for generateName, tokens.
//
// Backed by the OS CSPRNG (getrandom); thread-safe.
#pragma once

#include <string>

namespace klutch::core {

// n random bytes from the OS.
std::string RandomBytes(size_t n);
// A random RFC 4122 version-4 UUID in lowercase text form.
std::string NewUuid();
// n characters from Kubernetes' generateName alphabet (consonants and digits without
// look-alikes: "bcdfghjklmnpqrstvwxz2456789").
std::string RandomSuffix(size_t n);
// A random password of `length` URL- and shell-safe characters (letters and digits without
// look-alikes).
std::string RandomPassword(size_t length = 24);

}  // namespace klutch::core
