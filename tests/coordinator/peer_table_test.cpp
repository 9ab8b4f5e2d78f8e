#include "coordinator/peer_table.h"

#include <gtest/gtest.h>

namespace hipq::coordinator {
namespace {

TEST(PeerTable, AReconnectingWorkerReplacesItsOldConnection) {
  PeerTable t;
  t.upsert("r1", "w1").credit = 1;
  t.upsert("r2", "w1");
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.find("r1"), nullptr);
  ASSERT_NE(t.find_worker("w1"), nullptr);
  EXPECT_EQ(t.find_worker("w1")->routing_id, "r2");
}

TEST(PeerTable, WantingWorkListsPeersWithCreditOldestAskFirstAndSkipsDraining) {
  PeerTable t;
  auto now = std::chrono::steady_clock::now();
  Peer& a = t.upsert("ra", "a");
  a.credit = 1;
  a.asked_at = now;
  Peer& b = t.upsert("rb", "b");
  b.credit = 1;
  b.asked_at = now - std::chrono::seconds(1);
  Peer& c = t.upsert("rc", "c");
  c.credit = 1;
  c.draining = true;
  t.upsert("rd", "d");  // no credit
  EXPECT_EQ(t.wanting_work(), (std::vector<std::string>{"rb", "ra"}));
  EXPECT_TRUE(t.any_wanting_work());
  a.credit = 0;
  b.credit = 0;
  EXPECT_FALSE(t.any_wanting_work()) << "draining and credit-less peers want nothing";
}

TEST(PeerTable, SilentSinceFindsPeersNotHeardFrom) {
  PeerTable t;
  auto now = std::chrono::steady_clock::now();
  t.upsert("r1", "w1").last_seen = now - std::chrono::seconds(5);
  t.upsert("r2", "w2").last_seen = now;
  EXPECT_EQ(t.silent_since(now - std::chrono::seconds(3)), (std::vector<std::string>{"r1"}));
  t.remove("r1");
  EXPECT_EQ(t.find_worker("w1"), nullptr);
}

}  // namespace
}  // namespace hipq::coordinator
