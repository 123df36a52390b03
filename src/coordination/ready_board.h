// ReadyBoard: how the ranks of one host agree on cached tensors without
// rank 0. Each rank owns a small area of shared memory (its "board") that
// every other rank reads. In a round, each rank posts the response-cache
// slots it has ready (ascending), the epoch (response lists executed) at
// which it looked them up, and, for small tensors, their bytes. Once every
// rank has posted the round, each one reads every board and computes the
// same result: the slots posted by everyone, executed in slot order, with no
// message to rank 0 and back. Tensors whose bytes every rank posted need no
// collective at all: each rank reduces them straight from the boards.
//
// A round counts only when every rank posted the same epoch (the caches are
// then identical); otherwise every rank discards it alike. Rounds run one at
// a time: a rank posts round k+1 only after reading round k, and a board
// keeps two rounds' contents (by parity), so a rank never overwrites what a
// slower peer is still reading. A rank posts when it has new slots, or when
// another rank has posted a round it has not (it joins with what it has,
// possibly nothing), so a round completes within one loop step of every
// rank. When to post and what to do with the result is the engine's.
//
// A rank whose offer waited out the engine's patience sends it to rank 0
// and marks its slot, with the epoch, in its area. It will not post that
// submission again, so a peer holding an offer of the slot that it has not
// executed since sends it the same way at once, instead of waiting out a
// patience of its own for a round that cannot agree on it. Marks are hints:
// slots share them modulo kMarks, and a wrong reading costs one tensor a
// trip through rank 0 or one patience, never a result.
//
// Everything read from a peer's board is checked against the layout's
// bounds before use: slots ascending and below the cache's capacity, counts
// and payload lengths within the board.
//
// Owns nothing: the areas belong to the shared-memory group. Used by one
// thread at a time (whichever drives the engine's loop).
#ifndef HOROVOD_COORDINATION_READY_BOARD_H_
#define HOROVOD_COORDINATION_READY_BOARD_H_

#include <horovod/status.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace horovod {

class ReadyBoard {
 public:
  // Most slots one round can carry, and most bytes of small tensors.
  static constexpr size_t kMaxSlots = 2048;
  static constexpr size_t kPayloadBytes = 32 << 10;
  // Marks of slots sent to rank 0 each area holds.
  static constexpr size_t kMarks = 4096;
  // Bytes of one rank's area (zeroed by its creator).
  static size_t AreaBytes();

  // One slot a rank offers: `bytes` > 0 also posts that many bytes of the
  // tensor, which `fill` writes (bytes == 0: the slot goes through a
  // collective if agreed).
  struct Offer {
    uint32_t slot;
    uint32_t bytes;
  };

  // What a completed round agreed on (valid until the next Poll).
  struct Result {
    bool agreed = false;           // every rank posted the same epoch
    int64_t fusion_threshold = 0;  // as rank 0 posted it
    std::vector<uint32_t> slots;   // posted by every rank, ascending
    // Per agreed slot: every rank posted its bytes, all of the same length.
    std::vector<uint32_t> carried_bytes;  // 0: not carried
    // For a carried slot k, member m's copy is payload(k, m).
    const char* payload(size_t k, int m) const {
      return payloads[k * members + m];
    }
    int members = 0;
    std::vector<const char*> payloads;
  };

  // `areas[m]`: member m's area; `me`: our index; `capacity`: the response
  // cache's (slots at or above it are refused); `wake(m)`, called after a
  // post, must wake member m's loop if it sleeps (an awake loop checks
  // Readable and Behind itself as it waits).
  ReadyBoard(std::vector<char*> areas, int me, uint32_t capacity,
             std::function<void(int)> wake);

  int size() const { return static_cast<int>(areas_.size()); }
  // We have posted a round that we have not read back yet.
  bool open() const { return posted_ > read_; }
  // Some member has posted a round after our last one: join it.
  bool Behind() const;
  // While open: every member has posted our round (Poll will complete it).
  bool Readable() const;

  // Posts the next round. Not while open(). `offers` ascending by slot, at
  // most kMaxSlots, carried bytes at most kPayloadBytes in all; fill(i, dst)
  // writes offer i's bytes.
  void Post(uint64_t epoch, int64_t fusion_threshold,
            const std::vector<Offer>& offers,
            const std::function<void(size_t, char*)>& fill);

  // While open: true once every member has posted our round, with *out
  // filled in (and the round closed). A member's board that breaks the
  // layout's bounds fails the job: its process is not one of ours.
  Status Poll(bool* complete, Result* out);

  // Our offer of `slot` goes to rank 0 at `epoch` (response lists executed)
  // after waiting out the patience.
  void MarkSentUsually(uint32_t slot, uint64_t epoch);
  // We executed `slot` in response list `epoch` (counted from 1): marks
  // made before it are of submissions already done.
  void NoteExecuted(uint32_t slot, uint64_t epoch);
  // Some member marked `slot` after the last list that executed it here.
  bool PeerSentUsually(uint32_t slot) const;
  // Some other member has marked a slot since the job began: without one,
  // PeerSentUsually is false for every slot (one read per member, where a
  // step offering many slots would read each slot's marks).
  bool PeersMarked() const;

 private:
  struct Half;
  Half* half(int m, uint64_t round) const;
  // Member m's marks, each 0 or the marking epoch + 1, and after them
  // (at kMarks) how many marks it made.
  std::atomic<uint64_t>* marks(int m) const;
  Status Check(int m, const Half& h) const;
  // `h` lists exactly the entries of `mine`.
  static bool SameList(const Half& h, const Half& mine);
  // The result of a round in which every member posted `mine`'s list.
  void TakeList(const Half& mine, uint64_t round, Result* out);

  std::vector<char*> areas_;
  int me_;
  uint32_t capacity_;
  std::function<void(int)> wake_;
  uint64_t posted_ = 0;             // rounds we posted
  uint64_t read_ = 0;               // rounds we read back
  std::vector<size_t> cursor_;      // per member, merge position
  std::vector<uint32_t> offset_;    // per member, payload offset at cursor
  std::vector<uint64_t> executed_;  // per mark, the last list executing it
};

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_READY_BOARD_H_
