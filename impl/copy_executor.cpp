#include "impl/copy_executor.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>

namespace kvsim::impl {

namespace {

// True if [addr, addr+len) overlaps a range of `ranges` (start → end).
bool overlaps(const std::map<std::uint64_t, std::uint64_t>& ranges, std::uint64_t addr,
              std::uint64_t len) {
  auto it = ranges.upper_bound(addr);
  if (it != ranges.end() && it->first < addr + len) return true;
  if (it != ranges.begin() && std::prev(it)->second > addr) return true;
  return false;
}

struct Pending {
  std::unique_ptr<Signal> done;
  CopyOutcome outcome;
};

// True if no two destination ranges of descs[first, last) overlap.
bool disjoint(const std::vector<CopyDescriptor>& descs, std::size_t first, std::size_t last,
              std::vector<std::pair<std::uint64_t, std::uint64_t>>& scratch) {
  scratch.clear();
  for (std::size_t i = first; i < last; ++i) {
    scratch.emplace_back(descs[i].dst_addr, descs[i].dst_addr + descs[i].length);
  }
  std::sort(scratch.begin(), scratch.end());
  for (std::size_t k = 1; k < scratch.size(); ++k) {
    if (scratch[k - 1].second > scratch[k].first) return false;
  }
  return true;
}

}  // namespace

std::size_t BatchSplitter::next(const std::vector<CopyDescriptor>& descs, std::size_t first) {
  // The common case: the next full batch's destinations are disjoint (one sort, no tree).
  const std::size_t last = std::min(descs.size(), first + kMaxBatchDescriptors);
  if (try_sorted_ && disjoint(descs, first, last, scratch_)) return last;
  // Else the batch ends before the first descriptor that overlaps an earlier one in it.
  dst_ranges_.clear();
  std::size_t i = first;
  for (; i < last && !overlaps(dst_ranges_, descs[i].dst_addr, descs[i].length); ++i) {
    dst_ranges_[descs[i].dst_addr] = descs[i].dst_addr + descs[i].length;
  }
  // The sorted check is tried again only after a batch came out full, so lists that overlap often
  // cost what the one-by-one walk costs, plus one sort per full batch.
  try_sorted_ = i == last;
  return i;
}

std::vector<std::vector<CopyDescriptor>> split_batches(const std::vector<CopyDescriptor>& descs) {
  std::vector<std::vector<CopyDescriptor>> batches;
  BatchSplitter splitter;
  for (std::size_t i = 0; i < descs.size();) {
    const std::size_t end = splitter.next(descs, i);
    batches.emplace_back(descs.begin() + static_cast<std::ptrdiff_t>(i),
                         descs.begin() + static_cast<std::ptrdiff_t>(end));
    i = end;
  }
  return batches;
}

namespace {

// Posts the batches `next` makes (false: none left) one after another and waits for each.
template <typename NextBatch>
CopyRun post_batches(Platform& platform, int device, Time deadline, LLMStatusCode timeout_status,
                     NextBatch next) {
  CopyRun run;
  std::vector<CopyDescriptor> batch;
  while (next(batch)) {
    // Shared with the completion callback, which may run after a timeout returned.
    auto pending = std::make_shared<Pending>();
    pending->done = platform.make_signal();
    try {
      platform.post(device, -1, std::move(batch), [pending](const CopyOutcome& outcome) {
        pending->outcome = outcome;
        pending->done->set();
      });
    } catch (const std::invalid_argument& e) {
      run.status = LLMStatusCode::LLM_FAILED;
      run.error = e.what();
      return run;
    }
    batch = {};
    ++run.batches;
    const Time now = platform.now();
    const Time budget = deadline == kForever ? kForever : (deadline > now ? deadline - now : 0);
    if (!pending->done->wait_for(budget)) {
      run.status = timeout_status;
      run.error = "copy not complete at the deadline";
      return run;
    }
    run.landed_bytes += pending->outcome.landed_bytes;
    if (!pending->outcome.ok) {
      run.status = kCopyFailedStatus;
      run.error = pending->outcome.error;
      return run;
    }
  }
  return run;
}

}  // namespace

CopyRun run_copies(Platform& platform, int device, const std::vector<CopyDescriptor>& descs,
                   Time deadline, LLMStatusCode timeout_status) {
  BatchSplitter splitter;  // one batch at a time: a long list is never copied whole
  std::size_t first = 0;
  return post_batches(platform, device, deadline, timeout_status,
                      [&](std::vector<CopyDescriptor>& batch) {
                        if (first == descs.size()) return false;
                        const std::size_t end = splitter.next(descs, first);
                        batch.assign(descs.begin() + static_cast<std::ptrdiff_t>(first),
                                     descs.begin() + static_cast<std::ptrdiff_t>(end));
                        first = end;
                        return true;
                      });
}

CopyRun run_disjoint_copies(Platform& platform, int device, const DescriptorList& descs,
                            Time deadline, LLMStatusCode timeout_status) {
  std::size_t first = 0;
  return post_batches(platform, device, deadline, timeout_status,
                      [&](std::vector<CopyDescriptor>& batch) {
                        if (first == descs.size) return false;
                        const std::size_t end = std::min(descs.size, first + kMaxBatchDescriptors);
                        batch.reserve(end - first);
                        for (; first < end; ++first) batch.push_back(descs.at(first));
                        return true;
                      });
}

}  // namespace kvsim::impl
