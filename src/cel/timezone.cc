#include "cel/timezone.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace klutch::cel {
namespace {

// A POSIX TZ rule ("PST8PDT,M3.2.0,M11.1.0") as found in a TZif footer.
struct PosixRule {
  bool valid = false;
  int64_t std_offset = 0;  // seconds east of UTC
  bool has_dst = false;
  int64_t dst_offset = 0;
  // Mm.w.d/time transitions (local time in the zone's current offset).
  int start_month = 0, start_week = 0, start_day = 0;
  int64_t start_time = 7200;
  int end_month = 0, end_week = 0, end_day = 0;
  int64_t end_time = 7200;
};

struct Zone {
  std::vector<int64_t> transitions;  // UTC seconds, ascending
  std::vector<uint8_t> indices;      // type index per transition
  std::vector<int64_t> offsets;      // utoff per type
  int64_t initial_offset = 0;
  PosixRule footer;
};

bool ParseName(std::string_view& s) {
  if (!s.empty() && s[0] == '<') {
    size_t end = s.find('>');
    if (end == std::string_view::npos) return false;
    s.remove_prefix(end + 1);
    return true;
  }
  size_t n = 0;
  while (n < s.size() && std::isalpha(static_cast<unsigned char>(s[n]))) ++n;
  if (n < 3) return false;
  s.remove_prefix(n);
  return true;
}

// [+-]hh[:mm[:ss]] -> seconds
bool ParseHms(std::string_view& s, int64_t& out) {
  int sign = 1;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    sign = s[0] == '-' ? -1 : 1;
    s.remove_prefix(1);
  }
  int64_t parts[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    size_t n = 0;
    int64_t v = 0;
    while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n])))
      v = v * 10 + (s[n++] - '0');
    if (n == 0) return false;
    parts[i] = v;
    s.remove_prefix(n);
    if (s.empty() || s[0] != ':') break;
    s.remove_prefix(1);
  }
  out = sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]);
  return true;
}

bool ParseRuleDate(std::string_view& s, int& month, int& week, int& day, int64_t& time) {
  if (s.empty() || s[0] != 'M') return false;
  s.remove_prefix(1);
  int vals[3];
  for (int i = 0; i < 3; ++i) {
    size_t n = 0;
    int v = 0;
    while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n])))
      v = v * 10 + (s[n++] - '0');
    if (n == 0) return false;
    vals[i] = v;
    s.remove_prefix(n);
    if (i < 2) {
      if (s.empty() || s[0] != '.') return false;
      s.remove_prefix(1);
    }
  }
  month = vals[0];
  week = vals[1];
  day = vals[2];
  time = 7200;
  if (!s.empty() && s[0] == '/') {
    s.remove_prefix(1);
    if (!ParseHms(s, time)) return false;
  }
  return month >= 1 && month <= 12 && week >= 1 && week <= 5 && day >= 0 && day <= 6;
}

PosixRule ParsePosix(std::string_view s) {
  PosixRule r;
  int64_t off;
  if (!ParseName(s) || !ParseHms(s, off)) return r;
  r.std_offset = -off;  // POSIX offsets are west of UTC
  r.valid = true;
  if (s.empty()) return r;
  if (!ParseName(s)) return PosixRule{};
  r.has_dst = true;
  r.dst_offset = r.std_offset + 3600;
  if (!s.empty() && s[0] != ',') {
    if (!ParseHms(s, off)) return PosixRule{};
    r.dst_offset = -off;
  }
  if (s.empty() || s[0] != ',') return PosixRule{};
  s.remove_prefix(1);
  if (!ParseRuleDate(s, r.start_month, r.start_week, r.start_day, r.start_time)) return PosixRule{};
  if (s.empty() || s[0] != ',') return PosixRule{};
  s.remove_prefix(1);
  if (!ParseRuleDate(s, r.end_month, r.end_week, r.end_day, r.end_time)) return PosixRule{};
  return r;
}

// Local seconds-since-epoch of rule date Mm.w.d (week 5 = the last such weekday) at `time`
// in year `y`.
int64_t RuleInstant(int64_t y, int month, int week, int day, int64_t time) {
  using namespace std::chrono;
  const year_month ym =
      year{static_cast<int>(y)} / std::chrono::month{static_cast<unsigned>(month)};
  const weekday wd{static_cast<unsigned>(day)};
  sys_days date =
      week == 5 ? sys_days{ym / wd[last]} : sys_days{ym / wd[static_cast<unsigned>(week)]};
  return static_cast<int64_t>(date.time_since_epoch().count()) * 86400 + time;
}

int64_t PosixOffset(const PosixRule& r, int64_t utc) {
  if (!r.has_dst) return r.std_offset;
  const int64_t days = utc / 86400 - (utc % 86400 < 0);
  const std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{days}}};
  const int64_t y = static_cast<int>(ymd.year());
  int64_t start =
      RuleInstant(y, r.start_month, r.start_week, r.start_day, r.start_time) - r.std_offset;
  int64_t end = RuleInstant(y, r.end_month, r.end_week, r.end_day, r.end_time) - r.dst_offset;
  bool dst = start < end ? (utc >= start && utc < end) : !(utc >= end && utc < start);
  return dst ? r.dst_offset : r.std_offset;
}

int64_t ReadBig(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  if (n == 4) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return static_cast<int64_t>(v);
}

std::unique_ptr<Zone> LoadZone(const std::string& name) {
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/' && c != '_' && c != '-' &&
        c != '+') {
      return nullptr;
    }
  }
  if (name.empty() || name[0] == '/' || name.find("..") != std::string::npos) return nullptr;
  std::ifstream in("/usr/share/zoneinfo/" + name, std::ios::binary);
  if (!in) return nullptr;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t size = data.size();
  auto header = [&](size_t at, int64_t(&counts)[6]) {
    if (at + 44 > size || std::memcmp(p + at, "TZif", 4) != 0) return false;
    for (int i = 0; i < 6; ++i) counts[i] = ReadBig(p + at + 20 + 4 * i, 4);
    return true;
  };
  int64_t c[6];  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  if (!header(0, c)) return nullptr;
  char version = static_cast<char>(p[4]);
  size_t at = 44;
  int tsize = 4;
  if (version >= '2') {
    at += c[3] * 4 + c[3] + c[4] * 6 + c[5] + c[2] * 8 + c[1] + c[0];
    if (!header(at, c)) return nullptr;
    at += 44;
    tsize = 8;
  }
  size_t need = at + c[3] * tsize + c[3] + c[4] * 6 + c[5] + c[2] * (tsize + 4) + c[1] + c[0];
  if (need > size || c[4] <= 0) return nullptr;
  auto zone = std::make_unique<Zone>();
  for (int64_t i = 0; i < c[3]; ++i)
    zone->transitions.push_back(ReadBig(p + at + i * tsize, tsize));
  at += c[3] * tsize;
  for (int64_t i = 0; i < c[3]; ++i) {
    uint8_t idx = p[at + i];
    if (idx >= c[4]) return nullptr;
    zone->indices.push_back(idx);
  }
  at += c[3];
  for (int64_t i = 0; i < c[4]; ++i) zone->offsets.push_back(ReadBig(p + at + i * 6, 4));
  zone->initial_offset = zone->offsets[0];
  if (version >= '2' && need < size && p[need] == '\n') {
    size_t end = data.find('\n', need + 1);
    if (end != std::string::npos) {
      zone->footer = ParsePosix(std::string_view(data).substr(need + 1, end - need - 1));
    }
  }
  return zone;
}

}  // namespace

std::optional<int64_t> UtcOffsetAt(const std::string& zone_name, int64_t utc_seconds) {
  if (zone_name == "UTC" || zone_name == "Z" || zone_name == "GMT") return 0;
  if (!zone_name.empty() && (zone_name[0] == '+' || zone_name[0] == '-' ||
                             std::isdigit(static_cast<unsigned char>(zone_name[0])))) {
    // Fixed offset: [+-]HH:MM
    std::string_view s = zone_name;
    int sign = 1;
    if (s[0] == '+' || s[0] == '-') {
      sign = s[0] == '-' ? -1 : 1;
      s.remove_prefix(1);
    }
    if (s.size() != 5 || s[2] != ':' || !std::isdigit(static_cast<unsigned char>(s[0])) ||
        !std::isdigit(static_cast<unsigned char>(s[1])) ||
        !std::isdigit(static_cast<unsigned char>(s[3])) ||
        !std::isdigit(static_cast<unsigned char>(s[4]))) {
      return std::nullopt;
    }
    int64_t h = (s[0] - '0') * 10 + (s[1] - '0');
    int64_t m = (s[3] - '0') * 10 + (s[4] - '0');
    if (h > 23 || m > 59) return std::nullopt;
    return sign * (h * 3600 + m * 60);
  }
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Zone>> cache;
  const Zone* zone = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(zone_name);
    if (it == cache.end()) {
      if (cache.size() > 512) return std::nullopt;
      it = cache.emplace(zone_name, LoadZone(zone_name)).first;
    }
    zone = it->second.get();
  }
  if (zone == nullptr) return std::nullopt;
  const auto& tr = zone->transitions;
  if (tr.empty() || utc_seconds < tr.front()) {
    if (tr.empty() && zone->footer.valid) return PosixOffset(zone->footer, utc_seconds);
    return zone->initial_offset;
  }
  if (utc_seconds >= tr.back() && zone->footer.valid) {
    return PosixOffset(zone->footer, utc_seconds);
  }
  size_t i =
      static_cast<size_t>(std::upper_bound(tr.begin(), tr.end(), utc_seconds) - tr.begin()) - 1;
  return zone->offsets[zone->indices[i]];
}

}  // namespace klutch::cel
