// libFuzzer target: what the bind backend reads from browsers and CLIs. Arbitrary bytes as a
// sealed value (state, session cookie, device handle), a Cookie header, a form body, the
// /authorize redirect parameters, a base64 payload and a BindingResponse. Nothing may crash, and no
// input may unseal under keys generated at start-up (that would be a forgery). A value sealed at
// start-up, mutated by the fuzzer's bytes, exercises the decryption path too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "apis/klutch/binding_response.h"
#include "bind/web/sealer.h"
#include "bind/web/web_protocol.h"
#include "core/random.h"
#include "core/strings.h"

namespace {

using klutch::bind::Sealer;

const Sealer& FreshSealer() {
  static const Sealer* sealer = [] {
    auto s = Sealer::New(klutch::core::RandomBytes(32), klutch::core::RandomBytes(32));
    if (!s.ok()) __builtin_trap();
    return new Sealer(*s);
  }();
  return *sealer;
}

const std::string& Genuine() {
  static const std::string* sealed = new std::string(FreshSealer().Seal(
      "session", klutch::machinery::Json{{"sub", "alice"}}, klutch::core::SystemTime::max()));
  return *sealed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto now = klutch::core::SystemTime(std::chrono::seconds(1700000000));
  for (std::string_view purpose : {"session", "state", "login", "device"}) {
    if (FreshSealer().Unseal(purpose, input, now).ok()) __builtin_trap();
  }
  // The genuine value with the input's bytes written over part of it.
  std::string mutated = Genuine();
  for (size_t i = 0; i < size && i + 3 < mutated.size(); ++i) {
    mutated[3 + (i * 7) % (mutated.size() - 3)] = input[i];
  }
  auto opened = FreshSealer().Unseal("session", mutated, now);
  if (opened.ok() && mutated != Genuine()) __builtin_trap();

  (void)klutch::bind::ParseCookies(input);
  (void)klutch::bind::FindCookie({input, input}, "klutch-bind-abc");
  auto form = klutch::bind::ParseForm(input);
  (void)klutch::bind::FirstValue(form, "s");
  (void)klutch::bind::IsValidId(input);
  (void)klutch::bind::CliRedirectUrl(input, std::nullopt);
  (void)klutch::bind::CliRedirectUrl(std::nullopt, input);
  (void)klutch::bind::AddQueryParameter(input, "response", input);
  (void)klutch::apis::klutch::DecodeAnyBase64(input);
  auto json = klutch::machinery::ParseJson(input);
  if (json.ok()) {
    (void)klutch::apis::klutch::DecodeBindingResponse(*json);
    std::string payload = klutch::apis::klutch::EncodeResponsePayload(*json);
    auto standard = klutch::core::Base64Decode(payload);
    auto url = klutch::core::Base64UrlDecode(payload);
    // Both alphabets must read the same text.
    if (!standard || !url || *standard != *url) __builtin_trap();
  }
  return 0;
}
