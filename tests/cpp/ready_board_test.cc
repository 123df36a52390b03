#include "coordination/ready_board.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace horovod {
namespace {

constexpr uint32_t kCapacity = 64;

// n members' boards in plain memory (zeroed, as a fresh segment is), and
// how often each member was rung.
struct Boards {
  explicit Boards(int n)
      : memory(n, std::vector<uint64_t>(ReadyBoard::AreaBytes() / 8 + 1, 0)),
        rings(n) {}
  ReadyBoard Make(int me, uint32_t capacity = kCapacity) {
    std::vector<char*> areas;
    for (auto& m : memory) areas.push_back(reinterpret_cast<char*>(m.data()));
    return ReadyBoard(areas, me, capacity, [this](int m) { rings[m]++; });
  }
  std::vector<std::vector<uint64_t>> memory;
  std::vector<std::atomic<int>> rings;
};

using Offers = std::vector<ReadyBoard::Offer>;

// Posts offers whose carried bytes are `tag` repeated.
void PostTagged(ReadyBoard& b, uint64_t epoch, const Offers& offers, char tag) {
  b.Post(epoch, 1000, offers,
         [&](size_t i, char* dst) { std::memset(dst, tag, offers[i].bytes); });
}

// Reads a complete round into `r`, as the engine does into one result
// round after round.
const ReadyBoard::Result& ReadInto(ReadyBoard& b, ReadyBoard::Result* r) {
  bool complete = false;
  Status st = b.Poll(&complete, r);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(complete);
  return *r;
}

ReadyBoard::Result Read(ReadyBoard& b) {
  ReadyBoard::Result r;
  ReadInto(b, &r);
  return r;
}

TEST(ReadyBoard, AgreesOnTheSlotsEveryMemberPosted) {
  Boards boards(3);
  std::vector<ReadyBoard> b;
  for (int m = 0; m < 3; ++m) b.push_back(boards.Make(m));
  PostTagged(b[0], 7, {{1, 0}, {4, 8}, {9, 4}, {20, 0}}, 'a');
  EXPECT_TRUE(b[0].open());
  EXPECT_FALSE(b[0].Readable());
  EXPECT_EQ(boards.rings[1], 1);
  EXPECT_EQ(boards.rings[2], 1);
  EXPECT_TRUE(b[1].Behind());
  PostTagged(b[1], 7, {{4, 8}, {9, 4}, {20, 0}}, 'b');
  bool complete = true;
  ReadyBoard::Result r;
  ASSERT_TRUE(b[0].Poll(&complete, &r).ok());
  EXPECT_FALSE(complete);  // member 2 has not posted
  // Member 2 carries slot 9 with other bytes: it goes by collective.
  PostTagged(b[2], 7, {{2, 0}, {4, 8}, {9, 0}, {20, 0}}, 'c');
  for (int m = 0; m < 3; ++m) {
    ASSERT_TRUE(b[m].Readable());
    r = Read(b[m]);
    EXPECT_FALSE(b[m].open());
    EXPECT_TRUE(r.agreed);
    EXPECT_EQ(r.fusion_threshold, 1000);
    EXPECT_EQ(r.slots, (std::vector<uint32_t>{4, 9, 20}));
    EXPECT_EQ(r.carried_bytes, (std::vector<uint32_t>{8, 0, 0}));
    for (int p = 0; p < 3; ++p) {
      ASSERT_NE(r.payload(0, p), nullptr);
      EXPECT_EQ(std::string(r.payload(0, p), 8), std::string(8, 'a' + p));
      EXPECT_EQ(r.payload(1, p), nullptr);
    }
  }
}

// The steady state: every member posts the same list, and each reads every
// member's bytes of each carried slot from that member's board.
TEST(ReadyBoard, MembersPostingOneListAgreeOnAllOfIt) {
  Boards boards(3);
  std::vector<ReadyBoard> b;
  for (int m = 0; m < 3; ++m) b.push_back(boards.Make(m));
  const Offers offers = {{0, 4}, {3, 0}, {5, 12}, {6, 0}, {40, 8}};
  std::vector<ReadyBoard::Result> results(3);  // each member's, reused
  for (int round = 0; round < 3; ++round) {
    for (int m = 0; m < 3; ++m)
      b[m].Post(2, 1000, offers, [&](size_t i, char* dst) {
        for (uint32_t j = 0; j < offers[i].bytes; ++j)
          dst[j] = static_cast<char>('a' + m + 3 * i + round);
      });
    for (int m = 0; m < 3; ++m) {
      const ReadyBoard::Result& r = ReadInto(b[m], &results[m]);
      EXPECT_TRUE(r.agreed);
      EXPECT_EQ(r.slots, (std::vector<uint32_t>{0, 3, 5, 6, 40}));
      EXPECT_EQ(r.carried_bytes, (std::vector<uint32_t>{4, 0, 12, 0, 8}));
      ASSERT_EQ(r.payloads.size(), 15u);
      for (size_t k = 0; k < offers.size(); ++k)
        for (int p = 0; p < 3; ++p) {
          if (offers[k].bytes == 0) {
            EXPECT_EQ(r.payload(k, p), nullptr);
            continue;
          }
          ASSERT_NE(r.payload(k, p), nullptr);
          EXPECT_EQ(std::string(r.payload(k, p), offers[k].bytes),
                    std::string(offers[k].bytes,
                                static_cast<char>('a' + p + 3 * k + round)))
              << "round " << round << " slot " << k << " member " << p;
        }
    }
  }
  // A shorter list, whose first slot carried nothing, then a round the
  // epochs do not agree on: nothing is left of the longer rounds.
  const Offers fewer = {{3, 0}, {5, 12}};
  for (int m = 0; m < 3; ++m) PostTagged(b[m], 2, fewer, 'x');
  for (int m = 0; m < 3; ++m) {
    const ReadyBoard::Result& r = ReadInto(b[m], &results[m]);
    EXPECT_EQ(r.slots, (std::vector<uint32_t>{3, 5}));
    EXPECT_EQ(r.carried_bytes, (std::vector<uint32_t>{0, 12}));
    ASSERT_EQ(r.payloads.size(), 6u);
    for (int p = 0; p < 3; ++p) {
      EXPECT_EQ(r.payload(0, p), nullptr);
      EXPECT_EQ(std::string(r.payload(1, p), 12), std::string(12, 'x'));
    }
  }
  for (int m = 0; m < 3; ++m) PostTagged(b[m], m == 2 ? 3 : 2, fewer, 'y');
  for (int m = 0; m < 3; ++m) {
    const ReadyBoard::Result& r = ReadInto(b[m], &results[m]);
    EXPECT_FALSE(r.agreed);
    EXPECT_TRUE(r.slots.empty() && r.payloads.empty());
  }
}

// A member that sent a slot to rank 0 marks it; the others see the mark
// until they execute that slot in a later response list, and never their
// own marks.
TEST(ReadyBoard, SlotsSentToRankZeroAreMarkedUntilExecuted) {
  Boards boards(3);
  std::vector<ReadyBoard> b;
  for (int m = 0; m < 3; ++m) b.push_back(boards.Make(m));
  for (int m = 0; m < 3; ++m) EXPECT_FALSE(b[m].PeerSentUsually(5));
  for (int m = 0; m < 3; ++m) EXPECT_FALSE(b[m].PeersMarked());
  // Everyone executed slot 5 in list 3; member 0 gives up on its next
  // submission at epoch 4.
  for (int m = 0; m < 3; ++m) b[m].NoteExecuted(5, 3);
  b[0].MarkSentUsually(5, 4);
  EXPECT_FALSE(b[0].PeersMarked());  // its own mark
  EXPECT_TRUE(b[1].PeersMarked());
  EXPECT_TRUE(b[2].PeersMarked());
  EXPECT_FALSE(b[0].PeerSentUsually(5));
  EXPECT_TRUE(b[1].PeerSentUsually(5));
  EXPECT_TRUE(b[2].PeerSentUsually(5));
  EXPECT_FALSE(b[1].PeerSentUsually(6));
  // Member 1 executes that submission (list 5): the mark is spent there,
  // and still news to member 2.
  b[1].NoteExecuted(5, 5);
  EXPECT_FALSE(b[1].PeerSentUsually(5));
  EXPECT_TRUE(b[2].PeerSentUsually(5));
  // Slots share marks modulo kMarks.
  EXPECT_TRUE(b[2].PeerSentUsually(5 + ReadyBoard::kMarks));
  // Marks live beside the rounds and leave them alone.
  PostTagged(b[0], 4, {{5, 4}}, 'a');
  PostTagged(b[1], 4, {{5, 4}}, 'b');
  PostTagged(b[2], 4, {{5, 4}}, 'c');
  for (int m = 0; m < 3; ++m) {
    const ReadyBoard::Result r = Read(b[m]);
    EXPECT_EQ(r.slots, (std::vector<uint32_t>{5}));
    EXPECT_EQ(r.carried_bytes, (std::vector<uint32_t>{4}));
  }
  EXPECT_TRUE(b[2].PeerSentUsually(5));
}

TEST(ReadyBoard, DifferentEpochsAreDiscardedByEveryone) {
  Boards boards(2);
  ReadyBoard a = boards.Make(0), b = boards.Make(1);
  PostTagged(a, 3, {{5, 4}}, 'a');
  PostTagged(b, 4, {{5, 4}}, 'b');
  EXPECT_FALSE(Read(a).agreed);
  EXPECT_FALSE(Read(b).agreed);
  // The next round, at the same epoch, counts.
  PostTagged(a, 4, {{5, 4}}, 'a');
  PostTagged(b, 4, {{5, 4}}, 'b');
  ReadyBoard::Result r = Read(a);
  EXPECT_TRUE(r.agreed);
  EXPECT_EQ(r.slots, std::vector<uint32_t>{5});
  EXPECT_TRUE(Read(b).agreed);
}

TEST(ReadyBoard, PayloadBeyondTheBoardGoesByCollective) {
  Boards boards(2);
  ReadyBoard a = boards.Make(0), b = boards.Make(1);
  const uint32_t big = ReadyBoard::kPayloadBytes / 2 + 1;
  const Offers offers = {{1, big}, {2, big}, {3, 16}};
  PostTagged(a, 0, offers, 'a');
  PostTagged(b, 0, offers, 'b');
  ReadyBoard::Result r = Read(a);
  EXPECT_EQ(r.slots, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(r.carried_bytes, (std::vector<uint32_t>{big, 0, 16}));
  EXPECT_EQ(r.payload(2, 1)[0], 'b');
}

// The most slots with the most carried bytes fit a board, and every
// tensor's bytes are read back from where its member wrote them.
TEST(ReadyBoard, AFullRoundKeepsEveryTensorsBytes) {
  constexpr uint32_t kSlots = ReadyBoard::kMaxSlots;
  constexpr uint32_t kBytes = ReadyBoard::kPayloadBytes / kSlots;
  Boards boards(2);
  ReadyBoard a = boards.Make(0, kSlots), b = boards.Make(1, kSlots);
  Offers offers;
  for (uint32_t s = 0; s < kSlots; ++s) offers.push_back({s, kBytes});
  auto post = [&](ReadyBoard& board, int member) {
    board.Post(0, 1000, offers, [&](size_t i, char* dst) {
      for (uint32_t j = 0; j < kBytes; ++j)
        dst[j] = static_cast<char>(i * 7 + j + member * 3);
    });
  };
  post(a, 0);
  post(b, 1);
  ReadyBoard::Result r = Read(a);
  ASSERT_EQ(r.slots.size(), kSlots);
  for (uint32_t k = 0; k < kSlots; ++k) {
    ASSERT_EQ(r.carried_bytes[k], kBytes) << k;
    for (int m = 0; m < 2; ++m)
      for (uint32_t j = 0; j < kBytes; ++j)
        ASSERT_EQ(r.payload(k, m)[j], static_cast<char>(k * 7 + j + m * 3))
            << "slot " << k << " member " << m << " byte " << j;
  }
}

TEST(ReadyBoard, MalformedBoardsAreRefused) {
  auto expect_refused = [](const Offers& bad) {
    Boards boards(2);
    ReadyBoard a = boards.Make(0), b = boards.Make(1);
    PostTagged(a, 0, {{1, 0}}, 'a');
    PostTagged(b, 0, bad, 'b');
    bool complete = true;
    ReadyBoard::Result r;
    Status st = a.Poll(&complete, &r);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("member 1"), std::string::npos) << st.message();
    EXPECT_FALSE(complete);
  };
  expect_refused({{3, 0}, {2, 0}});  // not ascending
  expect_refused({{3, 0}, {3, 0}});  // twice
  expect_refused({{kCapacity, 0}});  // beyond the cache
  // A board that lists our slots but miscounts its payload.
  Boards boards(2);
  ReadyBoard a = boards.Make(0), b = boards.Make(1);
  PostTagged(a, 0, {{1, 8}}, 'a');
  PostTagged(b, 0, {{1, 8}}, 'b');
  // Round 1 is in a board's second half (the halves come first, the marks
  // and their count's line after); its fourth word holds the count and,
  // above it, the payload's length.
  const size_t half_words =
      (ReadyBoard::AreaBytes() - ReadyBoard::kMarks * 8 - 64) / 2 / 8;
  boards.memory[1][half_words + 3] += uint64_t{1} << 32;
  bool complete = true;
  ReadyBoard::Result r;
  Status st = a.Poll(&complete, &r);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("member 1 is malformed: payload"),
            std::string::npos)
      << st.message();
}

TEST(ReadyBoard, AFasterMemberDoesNotOverwriteTheRoundBeingRead) {
  Boards boards(2);
  ReadyBoard a = boards.Make(0), b = boards.Make(1);
  PostTagged(a, 0, {}, 'a');
  EXPECT_TRUE(b.Behind());
  PostTagged(b, 0, {}, 'b');
  EXPECT_FALSE(a.Behind());
  ReadyBoard::Result r = Read(a);
  EXPECT_TRUE(r.agreed);
  EXPECT_TRUE(r.slots.empty());
  // a posts its next round before b has read the last one: b still reads
  // the last one (rounds alternate between two halves), then joins.
  PostTagged(a, 0, {{1, 4}}, 'a');
  EXPECT_TRUE(b.Behind());
  r = Read(b);
  EXPECT_TRUE(r.slots.empty());
  EXPECT_FALSE(b.open());
  PostTagged(b, 0, {{1, 4}}, 'b');
  EXPECT_EQ(Read(b).slots, std::vector<uint32_t>{1});
  EXPECT_EQ(Read(a).slots, std::vector<uint32_t>{1});
}

// Members running rounds as fast as they can, each with its own offers,
// compute the same agreement every round: what they all offered.
TEST(ReadyBoard, ConcurrentRoundsAgreeEverywhere) {
  const int n = 3, rounds = 500;
  Boards boards(n);
  std::vector<std::vector<std::vector<uint32_t>>> seen(n);
  std::vector<std::vector<Offers>> offered(n);
  std::vector<std::thread> threads;
  for (int m = 0; m < n; ++m)
    threads.emplace_back([&, m] {
      ReadyBoard b = boards.Make(m);
      std::mt19937 rng(m + 1);
      for (int k = 0; k < rounds; ++k) {
        Offers offers;
        for (uint32_t s = 0; s < kCapacity; ++s)
          if (rng() % 2) offers.push_back({s, static_cast<uint32_t>(s % 3)});
        offered[m].push_back(offers);
        b.Post(1, 0, offers, [&](size_t i, char* dst) {
          std::memset(dst, static_cast<char>(m), offers[i].bytes);
        });
        ReadyBoard::Result r;
        bool complete = false;
        while (!complete) {
          ASSERT_TRUE(b.Poll(&complete, &r).ok());
          if (!complete) std::this_thread::yield();
        }
        ASSERT_TRUE(r.agreed);
        for (size_t i = 0; i < r.slots.size(); ++i)
          for (int p = 0; p < n && r.carried_bytes[i] > 0; ++p)
            ASSERT_EQ(r.payload(i, p)[0], static_cast<char>(p));
        seen[m].push_back(r.slots);
      }
    });
  for (auto& t : threads) t.join();
  for (int k = 0; k < rounds; ++k) {
    std::vector<uint32_t> expected;
    for (const auto& o : offered[0][k]) {
      bool everywhere = true;
      for (int m = 1; m < n; ++m) {
        bool found = false;
        for (const auto& p : offered[m][k]) found |= p.slot == o.slot;
        everywhere &= found;
      }
      if (everywhere) expected.push_back(o.slot);
    }
    for (int m = 0; m < n; ++m) ASSERT_EQ(seen[m][k], expected) << k;
  }
}

}  // namespace
}  // namespace horovod
