#include "core/process_supervisor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

namespace klutch::core::process_supervisor_test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using Kind = SupervisorEvent::Kind;

// Simulated processes: Spawn hands out PIDs from 1000, a test ends one with Exit.
class FakeProcessControl final : public ProcessSupervisor::Control {
 public:
  Result<pid_t> Spawn(const ProcessSpec& spec) override {
    MutexLock lock(mu_);
    if (fail_spawns_) return NotFound("no such program " + spec.argv.at(0));
    pid_t pid = next_pid_++;
    return pid;
  }
  std::optional<int> Exited(pid_t pid, bool child) override {
    MutexLock lock(mu_);
    children_seen_[pid] = child;
    auto it = exit_codes_.find(pid);
    if (it == exit_codes_.end()) return std::nullopt;
    return child ? it->second : -1;
  }
  void Signal(pid_t pid, int signal) override {
    MutexLock lock(mu_);
    log_.push_back("signal " + std::to_string(pid) + " " + std::to_string(signal));
  }
  bool Stop(pid_t pid, milliseconds, int signal) override {
    MutexLock lock(mu_);
    log_.push_back("stop " + std::to_string(pid) + " " + std::to_string(signal));
    exit_codes_[pid] = 128 + signal;
    return true;
  }
  void KillGroup(pid_t pid) override {
    MutexLock lock(mu_);
    log_.push_back("kill " + std::to_string(pid));
  }

  void Exit(pid_t pid, int code) {
    MutexLock lock(mu_);
    exit_codes_[pid] = code;
  }
  void FailSpawns(bool fail) {
    MutexLock lock(mu_);
    fail_spawns_ = fail;
  }
  std::vector<std::string> Log() {
    MutexLock lock(mu_);
    return log_;
  }
  std::optional<bool> SeenAsChild(pid_t pid) {
    MutexLock lock(mu_);
    auto it = children_seen_.find(pid);
    if (it == children_seen_.end()) return std::nullopt;
    return it->second;
  }

 private:
  Mutex mu_;
  pid_t next_pid_ GUARDED_BY(mu_) = 1000;
  bool fail_spawns_ GUARDED_BY(mu_) = false;
  std::map<pid_t, int> exit_codes_ GUARDED_BY(mu_);
  std::map<pid_t, bool> children_seen_ GUARDED_BY(mu_);
  std::vector<std::string> log_ GUARDED_BY(mu_);
};

struct TimedEvent {
  SupervisorEvent event;
  milliseconds at;  // simulated time since the fixture started
};

// A supervisor on a FakeClock and FakeProcessControl with the broker's numbers (poll 100 ms,
// backoff 200 ms doubling to 10 s, reset after a minute up). Step() moves simulated time and
// returns once the watcher has looked at every process and blocked again.
class ProcessSupervisorTest : public ::testing::Test {
 protected:
  void Make(SupervisorOptions options) {
    options.clock = &clock_;
    start_ = clock_.MonotonicNow();
    supervisor_ = std::make_unique<ProcessSupervisor>(
        options,
        [this](const SupervisorEvent& e) {
          MutexLock lock(mu_);
          events_.push_back(
              {e, std::chrono::duration_cast<milliseconds>(clock_.MonotonicNow() - start_)});
        },
        &control_);
    ASSERT_TRUE(clock_.WaitForWaiters(1));
  }
  void MakeBrokerLike() {
    SupervisorOptions options;
    options.stop_all_at_once = true;
    Make(options);
  }

  void Step(milliseconds d) {
    uint64_t before = clock_.blocking_waits();
    clock_.Advance(d);
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (clock_.blocking_waits() <= before && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_GT(clock_.blocking_waits(), before) << "the watcher did not come round";
  }
  // Steps poll by poll until an event of `kind` for `name` arrives after `after` events;
  // returns its index (-1 after 2 minutes of simulated time).
  int StepUntil(Kind kind, const std::string& name, size_t after) {
    for (int i = 0; i < 1200; ++i) {
      {
        MutexLock lock(mu_);
        for (size_t j = after; j < events_.size(); ++j) {
          if (events_[j].event.kind == kind && events_[j].event.name == name)
            return static_cast<int>(j);
        }
      }
      Step(100ms);
    }
    return -1;
  }
  std::vector<TimedEvent> Events() {
    MutexLock lock(mu_);
    return events_;
  }
  size_t EventCount() {
    MutexLock lock(mu_);
    return events_.size();
  }
  // Ends the process and returns how long after its exit was seen it was restarted.
  milliseconds RestartDelay(const std::string& name) {
    auto info = supervisor_->Get(name);
    EXPECT_TRUE(info.has_value());
    size_t before = EventCount();
    control_.Exit(info->pid, 1);
    int exited = StepUntil(Kind::kExited, name, before);
    int restarted = StepUntil(Kind::kRestarted, name, before);
    EXPECT_GE(exited, 0);
    EXPECT_GT(restarted, exited);
    auto events = Events();
    return events[restarted].at - events[exited].at;
  }

  SupervisedProcess Process(const std::string& name) {
    SupervisedProcess p;
    p.name = name;
    p.spec.argv = {"/bin/" + name};
    return p;
  }

  FakeClock clock_;
  MonoTime start_;
  FakeProcessControl control_;
  Mutex mu_;
  std::vector<TimedEvent> events_ GUARDED_BY(mu_);
  std::unique_ptr<ProcessSupervisor> supervisor_;
};

TEST_F(ProcessSupervisorTest, RestartBackoffDoublesToItsCapAndResetsAfterAMinuteUp) {
  MakeBrokerLike();
  ASSERT_TRUE(supervisor_->Start(Process("postgres")).ok());
  std::vector<milliseconds> delays;
  for (int i = 0; i < 8; ++i) delays.push_back(RestartDelay("postgres"));
  EXPECT_EQ(delays, (std::vector<milliseconds>{200ms, 400ms, 800ms, 1600ms, 3200ms, 6400ms, 10000ms,
                                               10000ms}));
  // Up for more than a minute: the next crash restarts after the first step again.
  Step(61s);
  EXPECT_EQ(RestartDelay("postgres"), 200ms);
  EXPECT_EQ(RestartDelay("postgres"), 400ms);
  auto info = supervisor_->Get("postgres");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->restarts, 10);
  EXPECT_EQ(info->exits, 10);
  EXPECT_EQ(info->state, SupervisedState::kUp);
}

TEST_F(ProcessSupervisorTest, TheSandboxNumbersAndAnExitCodeReachTheListener) {
  SupervisorOptions options;
  options.poll_interval = 200ms;
  options.initial_backoff = 1s;
  options.max_backoff = 30s;
  Make(options);
  ASSERT_TRUE(supervisor_->Start(Process("backend")).ok());
  pid_t first = supervisor_->Get("backend")->pid;
  control_.Exit(first, 3);
  int exited = StepUntil(Kind::kExited, "backend", 0);
  ASSERT_GE(exited, 0);
  auto event = Events()[exited].event;
  EXPECT_EQ(event.pid, first);
  EXPECT_EQ(event.exit_code, 3);
  EXPECT_TRUE(event.restarting);
  // Waiting for its restart: no PID.
  EXPECT_EQ(supervisor_->Get("backend")->pid, -1);
  int restarted = StepUntil(Kind::kRestarted, "backend", 0);
  EXPECT_EQ(Events()[restarted].at - Events()[exited].at, 1s);
  std::vector<milliseconds> delays;
  for (int i = 0; i < 6; ++i) delays.push_back(RestartDelay("backend"));
  EXPECT_EQ(delays, (std::vector<milliseconds>{2s, 4s, 8s, 16s, 30s, 30s}));
}

TEST_F(ProcessSupervisorTest, AFailedSpawnCountsAsAnotherExit) {
  MakeBrokerLike();
  ASSERT_TRUE(supervisor_->Start(Process("redis")).ok());
  control_.FailSpawns(true);
  control_.Exit(supervisor_->Get("redis")->pid, 1);
  int exited = StepUntil(Kind::kExited, "redis", 0);
  int failed = StepUntil(Kind::kRestartFailed, "redis", 0);
  ASSERT_GE(failed, 0);
  EXPECT_EQ(Events()[failed].at - Events()[exited].at, 200ms);
  EXPECT_NE(Events()[failed].event.error.find("/bin/redis"), std::string::npos);
  control_.FailSpawns(false);
  int restarted = StepUntil(Kind::kRestarted, "redis", 0);
  EXPECT_EQ(Events()[restarted].at - Events()[failed].at, 400ms);
  auto info = supervisor_->Get("redis");
  EXPECT_EQ(info->failed_restarts, 1);
  EXPECT_EQ(info->restarts, 1);
}

TEST_F(ProcessSupervisorTest, AProcessWithAProbeIsUpOnceItAnswersAndItsGroupWithIt) {
  MakeBrokerLike();
  std::atomic<bool> answers{false};
  for (int node = 0; node < 2; ++node) {
    SupervisedProcess p = Process("pg-" + std::to_string(node));
    p.group = "pg";
    if (node == 1) p.ready = [&answers] { return answers.load(); };
    ASSERT_TRUE(supervisor_->Start(std::move(p)).ok());
  }
  Step(100ms);
  EXPECT_EQ(supervisor_->Get("pg-0")->state, SupervisedState::kUp);
  EXPECT_EQ(supervisor_->Get("pg-1")->state, SupervisedState::kStarting);
  EXPECT_FALSE(supervisor_->GroupUp("pg"));
  EXPECT_FALSE(supervisor_->GroupUp("other"));
  answers = true;
  ASSERT_GE(StepUntil(Kind::kReady, "pg-1", 0), 0);
  EXPECT_TRUE(supervisor_->GroupUp("pg"));
}

TEST_F(ProcessSupervisorTest, AProcessNotToRestartIsForgottenWhenItExits) {
  MakeBrokerLike();
  SupervisedProcess p = Process("once");
  p.restart = false;
  ASSERT_TRUE(supervisor_->Start(std::move(p)).ok());
  control_.Exit(supervisor_->Get("once")->pid, 0);
  int exited = StepUntil(Kind::kExited, "once", 0);
  ASSERT_GE(exited, 0);
  EXPECT_FALSE(Events()[exited].event.restarting);
  EXPECT_FALSE(supervisor_->Get("once").has_value());
  // Its name is free again.
  EXPECT_TRUE(supervisor_->Start(Process("once")).ok());
  EXPECT_TRUE(IsAlreadyExists(supervisor_->Start(Process("once"))));
}

TEST_F(ProcessSupervisorTest, AnAdoptedProcessIsWatchedButNotReaped) {
  MakeBrokerLike();
  SupervisedProcess p = Process("adopted");
  p.adopt = 4242;
  ASSERT_TRUE(supervisor_->Start(std::move(p)).ok());
  Step(100ms);
  EXPECT_EQ(control_.SeenAsChild(4242), false);
  control_.Exit(4242, 0);
  int exited = StepUntil(Kind::kExited, "adopted", 0);
  ASSERT_GE(exited, 0);
  EXPECT_EQ(Events()[exited].event.exit_code, -1);
  int restarted = StepUntil(Kind::kRestarted, "adopted", 0);
  ASSERT_GE(restarted, 0);
  // The restarted one is ours.
  pid_t pid = Events()[restarted].event.pid;
  Step(100ms);
  EXPECT_EQ(control_.SeenAsChild(pid), true);
}

TEST_F(ProcessSupervisorTest, StopAllOneByOneGoesNewestFirst) {
  Make(SupervisorOptions{});
  for (const char* name : {"apiserver", "manager", "backend"}) {
    SupervisedProcess p = Process(name);
    ASSERT_TRUE(supervisor_->Start(std::move(p)).ok());
  }
  supervisor_->StopAll();
  EXPECT_EQ(control_.Log(),
            (std::vector<std::string>{"stop 1002 15", "stop 1001 15", "stop 1000 15"}));
  EXPECT_TRUE(supervisor_->List().empty());
  EXPECT_FALSE(supervisor_->Stop("backend").has_value());
}

TEST_F(ProcessSupervisorTest, StopAllAtOnceSignalsEveryProcessBeforeWaiting) {
  MakeBrokerLike();
  for (const char* name : {"a", "b"}) {
    SupervisedProcess p = Process(name);
    p.stop_signal = 2;
    ASSERT_TRUE(supervisor_->Start(std::move(p)).ok());
  }
  supervisor_->StopAll();
  EXPECT_EQ(control_.Log(), (std::vector<std::string>{"signal 1000 2", "signal 1001 2",
                                                      "stop 1000 2", "stop 1001 2"}));
  // Nothing is restarted after a stop.
  Step(1s);
  EXPECT_TRUE(supervisor_->List().empty());
  EXPECT_EQ(EventCount(), 0u);
}

TEST_F(ProcessSupervisorTest, ForgetLeavesTheProcessRunningAndKillAllReachesTheOthers) {
  MakeBrokerLike();
  ASSERT_TRUE(supervisor_->Start(Process("left")).ok());
  ASSERT_TRUE(supervisor_->Start(Process("kept")).ok());
  EXPECT_TRUE(supervisor_->Forget("left"));
  EXPECT_FALSE(supervisor_->Forget("left"));
  supervisor_->KillAll();
  EXPECT_EQ(control_.Log(), (std::vector<std::string>{"kill 1001"}));
  EXPECT_EQ(supervisor_->Stop("kept"), std::optional<bool>(true));
}

}  // namespace
}  // namespace klutch::core::process_supervisor_test
