// The NIF's judge of where an executable's executions start (bindings/elixir/plugboard/c_src/
// inline_launch_judge.h), driven with made-up launch times: a pure policy, so every case is exact.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "inline_launch_judge.h"

namespace {
using plugboard::nif::InlineLaunchJudge;
using namespace std::chrono_literals;

constexpr auto kFast = 20us;
constexpr auto kSlow = 900us;  // over the 500 us budget, under the 20 ms "far over"

void launches(InlineLaunchJudge& judge, std::chrono::nanoseconds took, int n) {
  for (int i = 0; i < n; ++i) judge.judge(took);
}

TEST(InlineLaunchJudge, WhatTheCompilePolicyRefusesNeverStartsInline) {
  InlineLaunchJudge judge(false);
  launches(judge, kFast, 10'000);
  EXPECT_FALSE(judge.may_launch_inline());
}

TEST(InlineLaunchJudge, OneOverrunIsForgivenTwoInARowAreNot) {
  InlineLaunchJudge judge(true);
  judge.judge(kSlow);
  EXPECT_TRUE(judge.may_launch_inline());
  judge.judge(kFast);  // the overrun was a moment's preemption
  judge.judge(kSlow);
  EXPECT_TRUE(judge.may_launch_inline());
  judge.judge(kSlow);
  EXPECT_FALSE(judge.may_launch_inline());
}

TEST(InlineLaunchJudge, OneLaunchFarOverTheBudgetIsEnough) {
  InlineLaunchJudge judge(true);
  judge.judge(25ms);
  EXPECT_FALSE(judge.may_launch_inline());
}

// The defect this judge fixes: two slow launches (a loaded machine) sent a small program to the
// launch pool for the rest of its life, a thread hop and a delivery on every later call.
TEST(InlineLaunchJudge, QuickLaunchesOnThePoolBringItBackInline) {
  InlineLaunchJudge judge(true);
  launches(judge, kSlow, 2);
  ASSERT_FALSE(judge.may_launch_inline());
  launches(judge, kFast, InlineLaunchJudge::kFirstComeBackAfter - 1);
  EXPECT_FALSE(judge.may_launch_inline());
  judge.judge(kFast);
  EXPECT_TRUE(judge.may_launch_inline());
}

TEST(InlineLaunchJudge, ASlowLaunchOnThePoolStartsTheCountAgain) {
  InlineLaunchJudge judge(true);
  launches(judge, kSlow, 2);
  launches(judge, kFast, InlineLaunchJudge::kFirstComeBackAfter - 1);
  judge.judge(kSlow);
  launches(judge, kFast, InlineLaunchJudge::kFirstComeBackAfter - 1);
  EXPECT_FALSE(judge.may_launch_inline());
  judge.judge(kFast);
  EXPECT_TRUE(judge.may_launch_inline());
}

// A program whose launches alternate between quick and slow comes back less and less often: its
// overruns on a scheduler are at most two per come_back_after() executions, which doubles each time.
TEST(InlineLaunchJudge, EachReturnDoublesTheQuickLaunchesTheNextOneNeeds) {
  InlineLaunchJudge judge(true);
  int needed = InlineLaunchJudge::kFirstComeBackAfter;
  for (int round = 0; round < 12; ++round) {
    launches(judge, kSlow, 2);
    ASSERT_FALSE(judge.may_launch_inline());
    ASSERT_EQ(judge.come_back_after(), needed);
    launches(judge, kFast, needed - 1);
    ASSERT_FALSE(judge.may_launch_inline()) << "round " << round;
    judge.judge(kFast);
    ASSERT_TRUE(judge.may_launch_inline()) << "round " << round;
    needed = std::min(2 * needed, InlineLaunchJudge::kMaxComeBackAfter);
  }
  EXPECT_EQ(judge.come_back_after(), InlineLaunchJudge::kMaxComeBackAfter);
}

TEST(InlineLaunchJudge, QuickLaunchesWhileInlineChangeNothing) {
  InlineLaunchJudge judge(true);
  launches(judge, kFast, 100'000);
  EXPECT_TRUE(judge.may_launch_inline());
  EXPECT_EQ(judge.come_back_after(), InlineLaunchJudge::kFirstComeBackAfter);
}

// Launches from many threads at once (many processes running one executable): no data race (the TSan
// build runs this), and the verdict follows the launches.
TEST(InlineLaunchJudge, ConcurrentLaunchesAreJudgedWithoutARace) {
  InlineLaunchJudge judge(true);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { launches(judge, kSlow, 1000); });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(judge.may_launch_inline());
  threads.clear();
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { launches(judge, kFast, 1000); });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(judge.may_launch_inline());
  // One thread alone brought it back: the count doubled once (two threads crossing the threshold
  // together used to double it twice).
  EXPECT_EQ(judge.come_back_after(), 2 * InlineLaunchJudge::kFirstComeBackAfter);
}

}  // namespace
