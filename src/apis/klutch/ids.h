// Identifiers of the binding protocol that both sides must compute alike
// (bind-protocol.md §2.8, §3.1 step 4): base-62 renderings of SHA-224 digests and of random
// bytes, with the digits 0-9a-zA-Z of a big-endian unsigned integer, no padding.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::apis::klutch {

// `bytes` read as one big-endian unsigned integer, written in base 62 ("0" for zero or empty).
std::string Base62(std::string_view bytes);
// Base62 of the SHA-224 digest of `data` (the export spec hash of §2.8).
std::string Sha224Base62(std::string_view data);
// The consumer cluster's ID: the first 6 characters of Sha224Base62 of the UID of its
// `klutch-bind` Namespace. Re-binding the same cluster yields the same ID, hence the same
// cluster namespace on the provider.
std::string ClusterIdFromNamespaceUid(std::string_view uid);
// A new CLI session ID: the first 6 characters of Base62 of 28 random bytes.
std::string NewSessionId();

}  // namespace klutch::apis::klutch
