//===- BoundSearchTests.cpp - The one plan/measure/tighten search ---------===//
#include "checkpoint/BoundSearch.h"

#include <gtest/gtest.h>

#include <string>

using namespace graphopt;

namespace {

/// A planner whose plan at knob k uses min(k, most) bytes and peaks at
/// base + used + miss (what the planner's own model does not see).
struct LinearWorld {
  int64_t base = 1000, most = 1000, miss = 0, least = 0;
  unsigned calls = 0;
  BoundProbeFn probe() {
    return [this](int64_t knob) -> absl::StatusOr<BoundProbe> {
      ++calls;
      const int64_t used = std::max(least, std::min(knob, most));
      return BoundProbe{base + used + miss, used, std::to_string(used), used == least,
                        used == most};
    };
  }
};

} // namespace

TEST(BoundSearchTest, AMeasuredMissIsPlannedAwayInTheNextRound) {
  // checkpoint{measure=true}'s use: no margin, no loosening; the first plan
  // measures 50 bytes over what it was planned for.
  LinearWorld w;
  w.miss = 50;
  BoundSearchOptions o;
  o.bound = 1600;
  o.firstKnob = 600; // the budget above the base
  auto r = searchBound(o, w.probe());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->rounds.size(), 2u);
  EXPECT_FALSE(r->rounds[0].withinAim);
  EXPECT_EQ(r->rounds[1].knob, 550);
  EXPECT_EQ(r->rounds[1].probe.peak, 1600);
  ASSERT_TRUE(r->best.has_value());
  EXPECT_EQ(*r->best, 1u);
  EXPECT_EQ(r->ended, "within the aim");
}

TEST(BoundSearchTest, APlanTooFarUnderTheAimIsLoosenedUntilWithinTheSlack) {
  // compile.py's use: aimed 3% under the bound, a plan more than 2% of the
  // bound under the aim asks for a looser one; the first knob here gives a
  // plan far under the aim, which is loosened until it lands within the slack.
  LinearWorld w;
  BoundSearchOptions o;
  o.bound = 1800;
  o.margin = 0.03;
  o.slack = 0.02;
  o.maxRounds = 6;
  o.firstKnob = 100;
  auto r = searchBound(o, w.probe());
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->best.has_value());
  const int64_t peak = r->rounds[*r->best].probe.peak;
  EXPECT_LE(peak, r->aim);
  EXPECT_GE(peak, r->aim - static_cast<int64_t>(0.02 * 1800));
  EXPECT_EQ(r->aim, 1746);
}

TEST(BoundSearchTest, OverTheAimAtThePlannersLeastEndsWithTheClosest) {
  LinearWorld w;
  w.least = 300;
  BoundSearchOptions o;
  o.bound = 1200; // the least plan peaks at 1300
  o.maxRounds = 6;
  o.firstKnob = 200;
  auto r = searchBound(o, w.probe());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->best.has_value());
  EXPECT_EQ(r->rounds.size(), 1u);
  EXPECT_EQ(r->rounds[r->closest].probe.peak, 1300);
  EXPECT_EQ(r->ended, "over the aim at the planner's least");
}

TEST(BoundSearchTest, ThePeakOfTheClosestPlanIsKeptWhenRoundsRunOut) {
  // The peak falls a tenth as fast as the knob (ResNet-50's from 816 MiB:
  // 695, 692, 692 and 690.5): each round over doubles the step, and three
  // rounds do not reach the bound; the closest is the last.
  BoundProbeFn slow = [](int64_t knob) -> absl::StatusOr<BoundProbe> {
    return BoundProbe{600 + knob / 10, knob, std::to_string(knob), false, false};
  };
  BoundSearchOptions o;
  o.bound = 500;
  o.firstKnob = 1000;
  auto r = searchBound(o, slow);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->rounds.size(), 3u);
  EXPECT_EQ(r->rounds[1].knob, 800);
  EXPECT_EQ(r->rounds[2].knob, 440); // 800 less twice the 180 over
  EXPECT_FALSE(r->best.has_value());
  EXPECT_EQ(r->closest, 2u);
  EXPECT_EQ(r->ended, "3 rounds");
}

TEST(BoundSearchTest, ThePlannerGivingAPlanAgainEndsTheSearch) {
  unsigned calls = 0;
  BoundProbeFn same = [&](int64_t) -> absl::StatusOr<BoundProbe> {
    ++calls;
    return BoundProbe{2000, 100, "the one plan", false, false};
  };
  BoundSearchOptions o;
  o.bound = 1000;
  o.maxRounds = 6;
  o.firstKnob = 500;
  auto r = searchBound(o, same);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 2u);
  EXPECT_EQ(r->rounds.size(), 1u);
  EXPECT_EQ(r->ended, "the planner gave a plan it gave before");
}

TEST(BoundSearchTest, AProbesErrorIsTheSearchs) {
  BoundProbeFn failing = [](int64_t) -> absl::StatusOr<BoundProbe> {
    return absl::InternalError("the measurement failed");
  };
  BoundSearchOptions o;
  o.bound = 1000;
  auto r = searchBound(o, failing);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the measurement failed");
}
