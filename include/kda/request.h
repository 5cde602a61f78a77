// kda/request.h — per-request resolution of a step (SPEC §3, §4), shared by the CPU backend
// and every CUDA kernel: which window and state slots a request reads and writes, its conv
// offset, its records row, and whether it is a pad or a caller error found in the data.
//
// NOTES: the checks run on the device from the data (slot ids, accepted, pending are
// device values), so a bad request never reaches memory: it is treated as a pad (zero
// output, nothing read or written) and its flag is raised.
#pragma once

#include <cstdint>

#include "kda/numerics.h"
#include "kda/params.h"
#include "kda/types.h"

namespace kda {

enum class RequestKind : int8_t { kRun = 0, kPad = 1, kError = 2 };

struct RequestPlan {
  RequestKind kind = RequestKind::kPad;
  uint32_t flags = 0;
  int32_t accepted = 1;  ///< conv offset off = accepted - 1
  // Slot and row ids (int32 like the index tensors); offsets are formed in int64 at use.
  int32_t win_in = 0;     ///< conv slot read
  int32_t win_out = 0;    ///< conv slot written (decode: out_slots[b]; else win_in)
  int32_t state_in = 0;   ///< state slot read (decode slot, per-token start, checkpoint)
  int32_t state_out = 0;  ///< decode: out slot; fused: checkpoint (after the fold)
  int32_t row = 0;        ///< records row (record / fused)
  int32_t pending = 0;    ///< records to fold first (fused, append)
};

KDA_HD bool is_pad_id(int64_t id, int32_t null_slot) { return id < 0 || id == null_slot; }

/// slots[b, t] (t = 0 for 1-D slot tensors).
KDA_HD int64_t slot_at(const StepParams& p, int b, int t) {
  return p.slots[int64_t(b) * p.slots_stride0 + int64_t(t) * p.slots_stride1];
}

/// Resolves request b of a step. Pure function of the params and the device data it reads
/// (slots, accepted, out_slots, record_rows, pending).
KDA_HD RequestPlan resolve_request(const StepParams& p, int b) {
  RequestPlan r;
  const int32_t s0 = int32_t(slot_at(p, b, 0));
  if (is_pad_id(s0, p.null_slot)) {
    r.kind = RequestKind::kPad;
    return r;
  }
  uint32_t f = 0;
  const int32_t acc = p.accepted ? p.accepted[int64_t(b) * p.accepted_stride] : 1;
  r.accepted = acc;
  const bool acc_ok =
      acc >= 1 && acc <= p.window - p.W + 2 && (p.mode != int32_t(StepMode::kPerToken) || acc <= p.slots_cols);
  if (!acc_ok) f |= kAccepted;
  if (s0 >= p.conv_slots || s0 >= p.state_slots) f |= kSlotRange;
  r.win_in = s0;
  r.win_out = s0;
  r.state_in = s0;
  r.state_out = s0;

  switch (StepMode(p.mode)) {
    case StepMode::kDecode: {
      if (p.out_slots) {
        const int32_t os = p.out_slots[int64_t(b) * p.out_slots_stride];
        if (os < 0 || os >= p.conv_slots || os >= p.state_slots || os == p.null_slot) f |= kRowRange;
        r.win_out = os;
        r.state_out = os;
      }
      break;
    }
    case StepMode::kPerToken: {
      if (acc_ok) {
        const int32_t st = int32_t(slot_at(p, b, acc - 1));
        if (is_pad_id(st, p.null_slot))
          f |= kPadStart;
        else if (st >= p.state_slots)
          f |= kSlotRange;
        r.state_in = st;
      }
      for (int t = 1; t < p.q; ++t) {
        const int64_t id = slot_at(p, b, t);
        if (!is_pad_id(id, p.null_slot) && id >= p.state_slots) f |= kSlotRange;
      }
      break;
    }
    case StepMode::kRecord:
    case StepMode::kFused:
    case StepMode::kAppend: {
      const int32_t row = p.record_rows ? p.record_rows[int64_t(b) * p.record_rows_stride] : s0;
      const bool row_ok = row >= 0 && row < p.record_rows_n && row != p.null_slot;
      if (!row_ok) f |= kRowRange;
      r.row = row;
      // fused and append fold what is pending: any count up to the row's Qr records (a
      // verify leaves `accepted`, append steps leave 1 … Qr)
      if (p.mode != int32_t(StepMode::kRecord) && row_ok) {
        const int32_t pend = p.pending[int64_t(row) * p.pending_stride];
        if (pend > p.Qr || pend < 0) f |= kPending;
        r.pending = pend;
      }
      break;
    }
  }
  r.flags = f;
  r.kind = f ? RequestKind::kError : RequestKind::kRun;
  return r;
}

/// Per-request resolution of commit / flush.
struct CommitPlan {
  RequestKind kind = RequestKind::kPad;
  uint32_t flags = 0;
  int64_t slot = 0;
  int64_t row = 0;
  int32_t count = 0;
};

KDA_HD CommitPlan resolve_commit(const CommitParams& p, int b) {
  CommitPlan c;
  const int64_t s = p.slots[int64_t(b) * p.slots_stride0];
  if (is_pad_id(s, p.null_slot)) return c;
  uint32_t f = 0;
  if (s >= p.state_slots) f |= kSlotRange;
  const int64_t row = p.record_rows ? p.record_rows[int64_t(b) * p.record_rows_stride] : s;
  const bool row_ok = row >= 0 && row < p.record_rows_n && row != p.null_slot;
  if (!row_ok) f |= kRowRange;
  int32_t n = 0;
  if (p.counts)
    n = p.counts[int64_t(b) * p.counts_stride];
  else if (row_ok)
    n = p.pending[row * p.pending_stride];
  if (n < 0 || n > p.Qr) f |= kPending;
  c.slot = s;
  c.row = row;
  c.count = n;
  c.flags = f;
  c.kind = f ? RequestKind::kError : RequestKind::kRun;
  return c;
}

}  // namespace kda
