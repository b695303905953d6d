// The engines' pure parts: parameters checked as the servers would check them, and backup
// encryption.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/file.h"
#include "core/random.h"
#include "engines/crypto.h"
#include "engines/data_service.h"

namespace klutch::engines {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

// What the engines accept is what the servers accept: a value PostgreSQL or Redis would
// refuse at start is refused here with 400 before any config is written.
TEST(EngineParametersTest, RedisValuesAreCheckedAgainstWhatRedisAccepts) {
  auto redis = NewRedisService(EngineContext{});
  auto ok = [&](Json params) { return redis->ValidateParameters(params); };
  for (const Json& good : std::vector<Json>{
           {{"maxmemory", "dynamic"}},  // the XRD's documented value: the plan decides
           {{"maxmemory", "0"}},
           {{"maxmemory", "64mb"}},
           {{"maxmemory", "100MB"}},
           {{"maxmemory", 1048576}},
           {{"maxmemory-policy", "allkeys-lru"}},
           {{"maxmemory-policy", "NOEVICTION"}},
           {{"maxmemory-samples", 5}},
           {{"maxclients", 0}},
           {{"maxclients", 100000}},  // accepted, capped by the plan
           {{"repl-backlog-size", "1mb"}},
           {{"lazyfree-lazy-eviction", "yes"}},
           {{"lazyfree-lazy-expire", false}},
           {{"tls-protocols", "TLSv1.2 TLSv1.3"}},
           {{"tls-ciphers", "ECDHE-RSA-AES256-GCM-SHA384:!aNULL"}},
           {{"notify-keyspace-events", "KEA"}},
           {{"notify-keyspace-events", ""}},
           {{"snapshot", "['save 900 1','save 300 10']"}},
           {{"lua-time-limit", 5000}}}) {
    EXPECT_TRUE(ok(good).ok()) << good.dump() << ": " << ok(good).message();
  }
  struct Bad {
    Json params;
    const char* mentions;
  };
  for (const Bad& bad :
       std::vector<Bad>{{{{"maxmemory-policy", std::string("allkeys-lru\0x", 13)}}, "volatile-lru"},
                        {{{"maxmemory-policy", "whatever the tenant likes"}}, "allkeys-lfu"},
                        {{{"maxmemory", "1t"}}, "dynamic"},
                        {{{"maxmemory", "-5mb"}}, "dynamic"},
                        {{{"maxmemory", "10 mb"}}, "dynamic"},
                        {{{"maxmemory", -1}}, "dynamic"},
                        {{{"maxclients", -1}}, "from 0 to"},
                        {{{"maxclients", "lots"}}, "from 0 to"},
                        {{{"maxmemory-samples", 0}}, "from 1 to 64"},
                        {{{"min-replicas-max-lag", -1}}, "from 0 to"},
                        {{{"repl-backlog-size", "0"}}, "greater than 0"},
                        {{{"lazyfree-lazy-eviction", "maybe"}}, "yes or no"},
                        {{{"tls-protocols", "SSLv3"}}, "TLSv1.3"},
                        {{{"tls-ciphers", "ALL\nrename-command CONFIG \"\""}}, "cipher list"},
                        {{{"tls-ciphersuites", "a\"b"}}, "cipher list"},
                        {{{"notify-keyspace-events", "gx"}}, "K or E"},
                        {{{"snapshot", "['save 0 1']"}}, "save"},
                        {{{"down-after-milliseconds", 1000}}, "Sentinel"},
                        {{{"appendonly", "yes"}}, "unknown parameter"}}) {
    auto st = ok(bad.params);
    ASSERT_FALSE(st.ok()) << bad.params.dump();
    EXPECT_TRUE(core::IsInvalid(st));
    EXPECT_NE(st.message().find(bad.params.begin().key()), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(bad.mentions), std::string::npos) << st.message();
  }
}

TEST(EngineParametersTest, PostgresqlMemoryAndRangesAreCheckedInTheSettingsUnits) {
  auto pg = NewPostgresService(EngineContext{});
  auto ok = [&](Json params) { return pg->ValidateParameters(params); };
  for (const Json& good : std::vector<Json>{{{"work_mem", "4MB"}},
                                            {{"work_mem", 64}},
                                            {{"work_mem", "2147483647kB"}},
                                            {{"maintenance_work_mem", "1GB"}},
                                            {{"effective_cache_size", "4GB"}},
                                            {{"effective_cache_size", "15TB"}},
                                            {{"max_connections", 100000 / 10}},
                                            {{"statement_timeout", 0}}}) {
    EXPECT_TRUE(ok(good).ok()) << good.dump() << ": " << ok(good).message();
  }
  struct Bad {
    Json params;
    const char* mentions;
  };
  for (const Bad& bad :
       std::vector<Bad>{{{{"work_mem", "9999999999TB"}}, "out of range"},
                        {{{"work_mem", "2TB"}}, "64 to 2147483647"},
                        {{{"work_mem", "63kB"}}, "out of range"},
                        {{{"work_mem", 63}}, "out of range"},
                        {{{"work_mem", "99999999999999999999999MB"}}, "amount of memory"},
                        {{{"work_mem", "4 MB"}}, "amount of memory"},
                        {{{"maintenance_work_mem", "1000kB"}}, "1024 to"},
                        {{{"effective_cache_size", "17TB"}}, "8kB"},
                        {{{"effective_cache_size", "1kB"}}, "out of range"},
                        {{{"log_statement", std::string("all\0", 4)}}, "none, ddl, mod, all"},
                        {{{"synchronous_commit", "sometimes"}}, "remote_apply"}}) {
    auto st = ok(bad.params);
    ASSERT_FALSE(st.ok()) << bad.params.dump();
    EXPECT_NE(st.message().find(bad.params.begin().key()), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(bad.mentions), std::string::npos) << st.message();
  }
}

TEST(CryptoTest, RoundTripTamperAndWrongKey) {
  fs::path dir = fs::temp_directory_path() / ("klutch-engines-crypto-" + core::RandomSuffix(8));
  fs::create_directories(dir);
  std::string data = core::RandomBytes(3 * 1024 * 1024 + 17);
  ASSERT_TRUE(core::WriteFileAtomic(dir / "plain", data).ok());
  std::string key = NewBackupKey();
  ASSERT_EQ(key.size(), 64u);
  ASSERT_TRUE(EncryptFile(dir / "plain", dir / "enc", key).ok());
  auto enc = core::ReadFile(dir / "enc");
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->size(), data.size() + 6 + 12 + 16);
  EXPECT_EQ(enc->find(data.substr(0, 64)), std::string::npos);
  ASSERT_TRUE(DecryptFile(dir / "enc", dir / "out", key).ok());
  EXPECT_EQ(*core::ReadFile(dir / "out"), data);

  auto wrong = DecryptFile(dir / "enc", dir / "out2", NewBackupKey());
  EXPECT_TRUE(core::IsInvalid(wrong));
  EXPECT_FALSE(fs::exists(dir / "out2"));

  std::string tampered = *enc;
  tampered[tampered.size() / 2] ^= 1;
  ASSERT_TRUE(core::WriteFileAtomic(dir / "tampered", tampered).ok());
  EXPECT_TRUE(core::IsInvalid(DecryptFile(dir / "tampered", dir / "out3", key)));
  ASSERT_TRUE(core::WriteFileAtomic(dir / "short", "KLBK1\n").ok());
  EXPECT_TRUE(core::IsInvalid(DecryptFile(dir / "short", dir / "out4", key)));
  EXPECT_TRUE(core::IsInvalid(EncryptFile(dir / "plain", dir / "x", "nothex")));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace klutch::engines
