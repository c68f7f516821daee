// Property 3, PA block mapping (spec §3.1, §3.4): random block tables (0 to 4096 entries made of
// single pairs, consecutive runs, duplicates and out-of-range indices), block sizes and
// dst_block_memory_size (None, 0, equal, different) for B2B, C2B and C2C. The outcome is either
// the documented error (raised at the call, or the config's result at its first layer) with
// nothing sent, or success with exactly the reference descriptors — one per maximal +1/+1 run
// and tensor for B2B — and destination bytes equal to the reference mapping, all else untouched.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "properties/prop_support.h"

namespace kvsim::properties {
namespace {

using impl::LLMRole;

enum class Mode { kB2B, kC2B, kC2C };
enum class Bms { kNone, kZero, kEqual, kDifferent };

/// A piece of the block table.
struct Segment {
  enum class Kind { kSingle, kRun, kRepeat, kOutOfRange };
  Kind kind = Kind::kSingle;
  int src = 0;
  int dst = 0;
  int length = 1;
};

/// A generated case. B2B reads blocks of `block_bytes` from a PA cache of `src_blocks`
/// blocks; C2B and C2C read row `src_row` of a contiguous cache of `rows` x `row_bytes`. The
/// destination tensors hold `dst_blocks` blocks of the destination block size.
struct Case {
  Mode mode = Mode::kB2B;
  int layers = 1;
  int block_bytes = 16;
  int src_blocks = 1;
  int dst_blocks = 1;
  int rows = 1;
  int row_bytes = 16;
  int src_row = 0;
  Bms bms = Bms::kNone;
  int device = 8;  ///< destination device: 8 over RoCE, 1 over HCCS
  std::vector<Segment> table;
  /// Inserts one pair with a source (B2B) or destination block past the end mid-table.
  std::optional<Segment> out_of_range{};
  /// C2B: cut the table to the ceil(tensor / block) pieces the source has.
  bool fit = true;
};

const char* name(Mode m) {
  return m == Mode::kB2B ? "B2B" : m == Mode::kC2B ? "C2B" : "C2C";
}

const char* name(Bms b) {
  return b == Bms::kNone    ? "None"
         : b == Bms::kZero  ? "0"
         : b == Bms::kEqual ? "equal"
                            : "different";
}

/// The (src, dst) pairs of a table, at most 4096.
std::vector<std::pair<std::int64_t, std::int64_t>> flatten(const Case& c) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const Segment& s : c.table) {
    switch (s.kind) {
      case Segment::Kind::kSingle:
        out.emplace_back(s.src, s.dst);
        break;
      case Segment::Kind::kRun: {
        const int n = std::min({s.length, c.src_blocks - s.src, c.dst_blocks - s.dst});
        for (int i = 0; i < n; ++i) out.emplace_back(s.src + i, s.dst + i);
        break;
      }
      case Segment::Kind::kRepeat:  // the previous pair's source again, next to its destination
        if (!out.empty()) out.emplace_back(out.back().first, out.back().second + 1);
        break;
      case Segment::Kind::kOutOfRange:
        out.emplace_back(c.src_blocks + s.src, c.dst_blocks + s.dst);
        break;
    }
  }
  if (c.out_of_range) {
    const auto at = out.begin() + static_cast<std::ptrdiff_t>(out.size() / 2);
    out.insert(at, {c.src_blocks + c.out_of_range->src, c.dst_blocks + c.out_of_range->dst});
  }
  std::size_t limit = 4096;
  if (c.mode == Mode::kC2B && c.fit) {
    const auto tensor = static_cast<std::size_t>(c.rows * c.row_bytes);
    const auto block = static_cast<std::size_t>(c.block_bytes);
    limit = std::min(limit, (tensor + block - 1) / block);
  }
  if (out.size() > limit) out.resize(limit);
  return out;
}

void showValue(const Case& c, std::ostream& os) {
  os << name(c.mode) << ", " << c.layers << " layer(s), dst_block_memory_size " << name(c.bms)
     << ", to device " << c.device << "; ";
  if (c.mode == Mode::kB2B) {
    os << "src " << c.src_blocks << " blocks of " << c.block_bytes << " B";
  } else {
    os << "src " << c.rows << " rows x " << c.row_bytes << " B, row " << c.src_row;
  }
  os << "; dst " << c.dst_blocks << " blocks; table (src->dst):";
  const auto pairs = flatten(c);
  for (std::size_t i = 0; i < pairs.size();) {
    std::size_t j = i + 1;
    while (j < pairs.size() && pairs[j].first == pairs[j - 1].first + 1 &&
           pairs[j].second == pairs[j - 1].second + 1) {
      ++j;
    }
    os << " " << pairs[i].first << "->" << pairs[i].second;
    if (j - i > 1) os << " x" << (j - i);
    i = j;
  }
  if (pairs.empty()) os << " (empty)";
  if (c.out_of_range) os << " (one past-the-end pair mid-table)";
}

rc::Gen<int> small_or_large(int small, int large) {
  return rc::gen::weightedOneOf<int>(
      {{4, rc::gen::inRange(1, small + 1)}, {1, rc::gen::inRange(small + 1, large + 1)}});
}

rc::Gen<Segment> gen_segment(int src_blocks, int dst_blocks) {
  using K = Segment::Kind;
  return rc::gen::build<Segment>(
      rc::gen::set(&Segment::kind,
                   rc::gen::weightedElement<K>({{6, K::kSingle}, {4, K::kRun}, {2, K::kRepeat}})),
      rc::gen::set(&Segment::src, rc::gen::inRange(0, src_blocks)),
      rc::gen::set(&Segment::dst, rc::gen::inRange(0, dst_blocks)),
      rc::gen::set(&Segment::length, small_or_large(8, 128)));
}

rc::Gen<Case> gen_case() {
  return rc::gen::mapcat(
      rc::gen::tuple(rc::gen::element(Mode::kB2B, Mode::kC2B, Mode::kC2C), small_or_large(32, 4096),
                     small_or_large(32, 4096)),
      [](const std::tuple<Mode, int, int>& t) {
        const auto [mode, src_blocks, dst_blocks] = t;
        const int rows_hint = 3;
        return rc::gen::build<Case>(
            rc::gen::set(&Case::mode, rc::gen::just(mode)),
            rc::gen::set(&Case::layers, rc::gen::inRange(1, 3)),
            rc::gen::set(&Case::block_bytes,
                         rc::gen::map(rc::gen::inRange(1, 9), [](int n) { return 16 * n; })),
            rc::gen::set(&Case::src_blocks, rc::gen::just(src_blocks)),
            rc::gen::set(&Case::dst_blocks, rc::gen::just(dst_blocks)),
            rc::gen::set(&Case::rows, rc::gen::inRange(1, rows_hint + 1)),
            rc::gen::set(&Case::row_bytes, rc::gen::inRange(1, 2049)),
            rc::gen::set(&Case::src_row, rc::gen::weightedOneOf<int>(
                                             {{5, rc::gen::just(0)}, {1, rc::gen::inRange(1, 4)}})),
            rc::gen::set(
                &Case::bms,
                rc::gen::weightedElement<Bms>(
                    {{2, Bms::kNone}, {1, Bms::kZero}, {3, Bms::kEqual}, {1, Bms::kDifferent}})),
            rc::gen::set(&Case::device, rc::gen::element(8, 1)),
            rc::gen::set(
                &Case::out_of_range,
                rc::gen::weightedOneOf<std::optional<Segment>>(
                    {{5, rc::gen::just(std::optional<Segment>())},
                     {1, rc::gen::map(rc::gen::pair(rc::gen::inRange(0, 4), rc::gen::inRange(0, 4)),
                                      [](std::pair<int, int> o) {
                                        return std::optional<Segment>(Segment{
                                            Segment::Kind::kOutOfRange, o.first, o.second, 1});
                                      })}})),
            rc::gen::set(&Case::fit, rc::gen::weightedElement<bool>({{4, true}, {1, false}})),
            rc::gen::set(&Case::table, mode == Mode::kC2C
                                           ? rc::gen::weightedOneOf<std::vector<Segment>>(
                                                 {{4, rc::gen::just(std::vector<Segment>{})},
                                                  {1, rc::gen::container<std::vector<Segment>>(
                                                          gen_segment(src_blocks, dst_blocks))}})
                                           : rc::gen::container<std::vector<Segment>>(
                                                 gen_segment(src_blocks, dst_blocks))));
      });
}

/// What the reference says the call does.
struct Expected {
  CallOutcome raised{};                               ///< at the call (§3.1)
  LLMStatusCode result = LLMStatusCode::LLM_SUCCESS;  ///< the config's result (§3.4)
  std::vector<CopyDescriptor> descriptors{};          ///< all layers, in posting order
  std::size_t runs = 0;                               ///< maximal runs (B2B)
};

/// The block lists the case passes: B2B both, C2B dst only, C2C src only (a rejected call).
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> block_lists(
    const Case& c, const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs) {
  std::vector<std::int64_t> src;
  std::vector<std::int64_t> dst;
  for (const auto& [s, d] : pairs) {
    if (c.mode != Mode::kC2B) src.push_back(s);
    if (c.mode != Mode::kC2C) dst.push_back(d);
  }
  return {src, dst};
}

/// The reference mapping. `src` / `dst`: tensor addresses; sizes in bytes.
Expected model(Case c, const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs,
               const std::vector<std::uint64_t>& src, std::uint64_t src_tensor,
               std::uint64_t src_stride, std::uint64_t src_batch,
               const std::vector<std::uint64_t>& dst, std::uint64_t dst_tensor,
               std::optional<std::int64_t> bms) {
  Expected e;
  if (c.mode == Mode::kB2B) c.src_row = 0;  // a PA source sends src_batch_index 0 (§3.1 item 6)
  const auto invalid = LLMStatusCode::LLM_PARAM_INVALID;
  const auto [src_list, dst_list] = block_lists(c, pairs);
  // §3.1 item 3 (B2B lists always have equal lengths here).
  if (!src_list.empty() && dst_list.empty()) {
    e.raised = llm_outcome(invalid);
    return e;
  }
  if (src_list.empty() && !dst_list.empty() && !bms) {
    e.raised = llm_outcome(invalid);
    return e;
  }
  if (dst_list.empty() && bms && *bms != 0) {
    e.raised = llm_outcome(invalid);
    return e;
  }
  const std::uint64_t b = bms ? static_cast<std::uint64_t>(*bms) : 0;
  for (int layer = 0; layer < c.layers; ++layer) {
    for (std::size_t t = 2 * static_cast<std::size_t>(layer); t < 2 * layer + 2u; ++t) {
      if (dst_list.empty()) {  // C2C
        if (static_cast<std::uint64_t>(c.src_row) >= src_batch) {
          e.result = invalid;
          e.descriptors.clear();
          return e;
        }
        e.descriptors.push_back({src[t] + c.src_row * src_stride, dst[t], src_stride});
      } else if (src_list.empty()) {  // C2B
        const std::uint64_t n = dst_list.size();
        const std::uint64_t rem = b == 0 ? 0 : src_tensor % b;
        const std::uint64_t pieces = b == 0 ? 0 : src_tensor / b + (rem ? 1 : 0);
        const std::uint64_t offset = c.src_row * src_stride;
        if (b == 0 || b >= src_tensor || static_cast<std::uint64_t>(c.src_row) >= src_batch ||
            pieces < n || offset + (n - 1) * b + (rem ? rem : b) > src_tensor) {
          e.result = invalid;
          e.descriptors.clear();
          return e;
        }
        for (std::uint64_t j = 0; j < n; ++j) {
          e.descriptors.push_back({src[t] + offset + j * b,
                                   dst[t] + static_cast<std::uint64_t>(dst_list[j]) * b,
                                   j == n - 1 && rem ? rem : b});
        }
      } else {  // B2B: maximal runs where both indices step by +1
        if (b != 0 && b != src_stride) {
          e.result = invalid;
          e.descriptors.clear();
          return e;
        }
        std::size_t runs = 0;
        for (std::size_t i = 0; i < src_list.size();) {
          std::size_t j = i + 1;
          while (j < src_list.size() && src_list[j] == src_list[j - 1] + 1 &&
                 dst_list[j] == dst_list[j - 1] + 1) {
            ++j;
          }
          if (static_cast<std::uint64_t>(src_list[j - 1]) >=
              static_cast<std::uint64_t>(c.src_blocks)) {
            e.result = invalid;
            e.descriptors.clear();
            return e;
          }
          e.descriptors.push_back({src[t] + static_cast<std::uint64_t>(src_list[i]) * src_stride,
                                   dst[t] + static_cast<std::uint64_t>(dst_list[i]) * src_stride,
                                   (j - i) * src_stride});
          ++runs;
          i = j;
        }
        e.runs = runs;
      }
    }
    // Destinations must lie in the peer's memory (kvsim: LLM_FAILED, nothing of the layer sent).
    for (std::size_t k = 0; k < e.descriptors.size(); ++k) {
      const CopyDescriptor& d = e.descriptors[k];
      bool inside = false;
      for (std::uint64_t base : dst) {
        if (d.dst_addr >= base && d.dst_addr + d.length <= base + dst_tensor) inside = true;
      }
      if (!inside) {
        e.result = LLMStatusCode::LLM_FAILED;
        e.descriptors.clear();
        return e;
      }
    }
  }
  return e;
}

RC_GTEST_PROP(BlockMapping, DocumentedErrorOrExactReferenceBytes, ()) {
  const Case c = *gen_case();
  const auto pairs = flatten(c);
  Harness h;
  auto p = h.make_dist(LLMRole::PROMPT, 1, 0, false);
  auto d = h.make_dist(LLMRole::DECODER, 2, c.device, true);
  RC_ASSERT(h.link(*p, 2, c.device) == LLMStatusCode::LLM_SUCCESS);

  const bool pa = c.mode == Mode::kB2B;
  const impl::CacheDesc desc =
      pa ? impl::CacheDesc(2 * c.layers, {c.src_blocks, c.block_bytes}, impl::DataType::DT_INT8)
         : impl::CacheDesc(2 * c.layers, {c.rows, c.row_bytes}, impl::DataType::DT_INT8);
  const std::uint64_t src_tensor = desc.size();
  std::vector<std::uint64_t> src_addrs;
  for (int t = 0; t < 2 * c.layers; ++t) {
    src_addrs.push_back(h.alloc(0, src_tensor, 100 + static_cast<std::uint64_t>(t)));
  }
  const impl::CacheView src = pa ? p->cache_manager().register_blocks_cache(desc, src_addrs)
                                 : p->cache_manager().register_cache(desc, src_addrs);
  const std::uint64_t src_stride =
      pa ? static_cast<std::uint64_t>(c.block_bytes) : static_cast<std::uint64_t>(c.row_bytes);
  const std::uint64_t src_batch = pa ? 1 : static_cast<std::uint64_t>(c.rows);

  std::optional<std::int64_t> bms;
  const std::int64_t natural =
      c.mode == Mode::kC2B ? c.block_bytes : static_cast<std::int64_t>(src_stride);
  switch (c.bms) {
    case Bms::kNone:
      break;
    case Bms::kZero:
      bms = 0;
      break;
    case Bms::kEqual:
      bms = natural;
      break;
    case Bms::kDifferent:
      bms = c.mode == Mode::kC2B ? static_cast<std::int64_t>(src_tensor) + natural : 2 * natural;
      break;
  }
  const std::uint64_t dst_unit =
      c.mode == Mode::kC2B ? static_cast<std::uint64_t>(c.block_bytes) : src_stride;
  const std::uint64_t dst_tensor = static_cast<std::uint64_t>(c.dst_blocks) * dst_unit;
  std::vector<std::uint64_t> dst_addrs;
  for (int t = 0; t < 2 * c.layers; ++t) {
    dst_addrs.push_back(h.alloc(c.device, dst_tensor, 500 + static_cast<std::uint64_t>(t)));
  }

  impl::TransferBlockArgs blocks;
  const auto [src_list, dst_list] = block_lists(c, pairs);
  if (!src_list.empty()) blocks.src_block_indices = src_list;
  if (!dst_list.empty()) blocks.dst_block_indices = dst_list;
  blocks.dst_block_memory_size = bms;
  std::vector<impl::AnyTransferConfig> configs = {
      impl::TransferConfig(2, dst_addrs, std::nullopt, pa ? 0 : c.src_row)};
  const Expected e =
      model(c, pairs, src_addrs, src_tensor, src_stride, src_batch, dst_addrs, dst_tensor, bms);

  struct Always final : impl::LayerSynchronizer {
    bool synchronize_layer(std::int64_t, std::optional<std::int64_t>) override { return true; }
  };
  h.recorder().batches.clear();
  std::vector<std::optional<LLMStatusCode>> results;
  const CallOutcome raised = outcome_of([&] {
    auto task =
        p->cache_manager().transfer_cache_async(src, std::make_shared<Always>(), configs, blocks);
    results = task.get_results();
  });
  RC_LOG() << "raised: " << rc::toString(raised) << "; results: " << rc::toString(results)
           << "\nbatches:\n"
           << show_batches(h.recorder().batches);
  RC_TAG(name(c.mode), raised.kind != CallOutcome::Kind::kOk
                           ? std::string("raised")
                           : std::string(impl::to_string(e.result)));
  RC_ASSERT(raised == e.raised);
  if (raised.kind == CallOutcome::Kind::kOk) {
    RC_ASSERT(results == (std::vector<std::optional<LLMStatusCode>>{e.result}));
  }

  std::vector<CopyDescriptor> posted;
  for (const Batch& b : h.recorder().batches) {
    RC_ASSERT(b.device == 0);
    RC_ASSERT(b.descriptors.size() <= 1024u);
    posted.insert(posted.end(), b.descriptors.begin(), b.descriptors.end());
  }
  RC_ASSERT(posted == e.descriptors);
  if (pa && !pairs.empty() && e.result == LLMStatusCode::LLM_SUCCESS &&
      raised.kind == CallOutcome::Kind::kOk) {
    RC_ASSERT(posted.size() == e.runs * 2 * static_cast<std::size_t>(c.layers));
  }
  // Bytes: the reference descriptors applied in order over the initial destination.
  std::vector<std::vector<std::uint8_t>> src_bytes;
  for (std::size_t s = 0; s < src_addrs.size(); ++s)
    src_bytes.push_back(pattern(src_tensor, 100 + s));
  for (std::size_t t = 0; t < dst_addrs.size(); ++t) {
    std::vector<std::uint8_t> expected = pattern(dst_tensor, 500 + t);
    for (const CopyDescriptor& x : e.descriptors) {
      if (x.dst_addr < dst_addrs[t] || x.dst_addr >= dst_addrs[t] + dst_tensor) continue;
      std::size_t s = 0;
      while (!(x.src_addr >= src_addrs[s] && x.src_addr < src_addrs[s] + src_tensor)) ++s;
      std::copy_n(src_bytes[s].begin() + static_cast<std::ptrdiff_t>(x.src_addr - src_addrs[s]),
                  x.length,
                  expected.begin() + static_cast<std::ptrdiff_t>(x.dst_addr - dst_addrs[t]));
    }
    RC_ASSERT(h.read(dst_addrs[t], dst_tensor) == expected);
  }
  RC_ASSERT(h.job_failures().empty());
}

}  // namespace
}  // namespace kvsim::properties
