#include "model/content_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "model/errors.h"
#include "model/units.h"

namespace kvsim::model {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
// Bytes compared per step when two extents must be compared byte by byte.
constexpr std::size_t kChunk = 4096;

// splitmix64's finaliser.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The seed is mixed before use so that nearby seeds give unrelated streams, not shifted copies.
std::uint64_t seed_key(std::uint64_t seed) {
  return mix64(seed ^ 0x243F6A8885A308D3ULL);
}

std::uint64_t pattern_word(std::uint64_t key, std::uint64_t word) {
  return mix64(key + word * kGolden);
}

// Writes bytes [stream, stream+n) of pattern `seed` to `out`; byte i is byte i%8 (little-endian)
// of word i/8, whatever the host's byte order.
void generate_pattern(std::uint64_t seed, std::uint64_t stream, std::uint8_t* out,
                      std::uint64_t n) {
  const std::uint64_t key = seed_key(seed);
  std::uint64_t word = stream >> 3;
  unsigned shift = static_cast<unsigned>(stream & 7) * 8;
  while (n > 0) {
    const std::uint64_t v = pattern_word(key, word++);
    if (shift == 0 && n >= 8) {
      for (unsigned b = 0; b < 8; ++b) out[b] = static_cast<std::uint8_t>(v >> (8 * b));
      out += 8;
      n -= 8;
      continue;
    }
    for (; shift < 64 && n > 0; shift += 8, --n) *out++ = static_cast<std::uint8_t>(v >> shift);
    shift = 0;
  }
}

}  // namespace

// A position in a store. Between two advances the bytes ahead of it, up to run(), come from one
// representation: one extent, or a gap that reads as kUnwrittenByte.
class ContentStore::Cursor {
 public:
  Cursor(const ContentStore& store, std::uint64_t pos)
      : map_(store.extents_), it_(store.locate(pos)), pos_(pos) {}

  /// Bytes ahead that share this representation (kMax at the end of the last extent).
  std::uint64_t run() const {
    if (inside()) return it_->first + it_->second.len() - pos_;
    return it_ == map_.end() ? kMax : it_->first - pos_;
  }

  /// Moves `n` <= run() bytes ahead.
  void advance(std::uint64_t n) {
    pos_ += n;
    if (inside() && pos_ == it_->first + it_->second.len()) ++it_;
  }

  /// True if both cursors read the same bytes for their common run without looking at them.
  bool same_origin(const Cursor& o) const {
    const Extent* a = extent();
    const Extent* b = o.extent();
    const Extent::Kind ka = a ? a->kind() : Extent::Kind::kFill;
    const Extent::Kind kb = b ? b->kind() : Extent::Kind::kFill;
    if (ka != kb) return false;
    switch (ka) {
      case Extent::Kind::kFill:
        return (a ? a->fill_value() : kUnwrittenByte) == (b ? b->fill_value() : kUnwrittenByte);
      case Extent::Kind::kLiteral:
      case Extent::Kind::kPattern:  // the same buffer or seed, at the same position
        return a->origin == b->origin && a->offset + delta() == b->offset + o.delta();
    }
    return false;
  }

  /// Writes the `n` bytes that start `skip` bytes ahead (skip + n <= run()) to `out`.
  void emit(std::uint64_t skip, std::uint64_t n, std::uint8_t* out) const {
    const Extent* e = extent();
    if (e == nullptr) {
      std::memset(out, kUnwrittenByte, n);
      return;
    }
    switch (e->kind()) {
      case Extent::Kind::kFill:
        std::memset(out, e->fill_value(), n);
        break;
      case Extent::Kind::kLiteral:
        std::memcpy(out, e->buffer()->bytes.data() + e->offset + delta() + skip, n);
        break;
      case Extent::Kind::kPattern:
        generate_pattern(e->seed(), e->offset + delta() + skip, out, n);
    }
  }

  /// Like emit, but returns literal bytes in place instead of copying them to `scratch`.
  const std::uint8_t* view(std::uint64_t skip, std::uint64_t n, std::uint8_t* scratch) const {
    const Extent* e = extent();
    if (e != nullptr && e->kind() == Extent::Kind::kLiteral) {
      return e->buffer()->bytes.data() + e->offset + delta() + skip;
    }
    emit(skip, n, scratch);
    return scratch;
  }

 private:
  bool inside() const { return it_ != map_.end() && it_->first <= pos_; }
  const Extent* extent() const { return inside() ? &it_->second : nullptr; }
  std::uint64_t delta() const { return pos_ - it_->first; }

  const Map& map_;
  Map::const_iterator it_;
  std::uint64_t pos_;
};

std::uint8_t ContentStore::pattern_byte(std::uint64_t seed, std::uint64_t i) {
  return static_cast<std::uint8_t>(pattern_word(seed_key(seed), i >> 3) >> ((i & 7) * 8));
}

void ContentStore::check_range(std::uint64_t addr, std::uint64_t len, const char* what) {
  if (len > kMax - addr) {
    throw ModelError(ErrorKind::kOutOfRange,
                     std::string("content ") + what + " of " + std::to_string(len) + " bytes at " +
                         format_address(addr) + " runs past the 64-bit address space");
  }
}

void ContentStore::write(std::uint64_t addr, const std::uint8_t* data, std::uint64_t len) {
  check_range(addr, len, "write");
  if (len == 0) return;
  if (data == nullptr) {
    throw ModelError(ErrorKind::kInvalidArgument, "content write of " + std::to_string(len) +
                                                      " bytes at " + format_address(addr) +
                                                      " from a null pointer");
  }
  // One repeated byte (a tensor of zeros, a memset done on the host) is kept as a fill: the
  // bytes read the same and cost one extent rather than len bytes of buffer.
  if (len >= kSmallestUniformFill && std::memcmp(data, data + 1, len - 1) == 0) {
    fill(addr, len, data[0]);
    return;
  }
  auto* buffer = new Buffer;
  buffer->bytes.assign(data, data + len);
  put(addr, Extent(Extent::Kind::kLiteral, len, reinterpret_cast<std::uint64_t>(buffer)));
}

void ContentStore::fill_pattern(std::uint64_t addr, std::uint64_t len, std::uint64_t seed) {
  check_range(addr, len, "fill_pattern");
  if (len == 0) return;
  // In pieces of at most 2^61 bytes (Extent::kMaxLen): only a range near 2^64 bytes long has two.
  for (std::uint64_t done = 0; done < len;) {
    const std::uint64_t n = std::min(len - done, std::uint64_t{1} << 61);
    put(addr + done, Extent(Extent::Kind::kPattern, n, seed, done));
    done += n;
  }
}

void ContentStore::fill(std::uint64_t addr, std::uint64_t len, std::uint8_t value) {
  check_range(addr, len, "fill");
  if (len == 0) return;
  for (std::uint64_t done = 0; done < len;) {
    const std::uint64_t n = std::min(len - done, std::uint64_t{1} << 61);
    put(addr + done, Extent(Extent::Kind::kFill, n, value));
    done += n;
  }
}

void ContentStore::clear(std::uint64_t addr, std::uint64_t len) {
  check_range(addr, len, "clear");
  erase_range(addr, len);
}

void ContentStore::read(std::uint64_t addr, std::uint8_t* out, std::uint64_t len) const {
  check_range(addr, len, "read");
  if (len == 0) return;
  if (out == nullptr) {
    throw ModelError(ErrorKind::kInvalidArgument, "content read of " + std::to_string(len) +
                                                      " bytes at " + format_address(addr) +
                                                      " into a null pointer");
  }
  Cursor c(*this, addr);
  for (std::uint64_t done = 0; done < len;) {
    const std::uint64_t n = std::min(c.run(), len - done);
    c.emit(0, n, out + done);
    c.advance(n);
    done += n;
  }
}

std::vector<std::uint8_t> ContentStore::read(std::uint64_t addr, std::uint64_t len) const {
  check_range(addr, len, "read");
  std::vector<std::uint8_t> out(len);
  read(addr, out.data(), len);
  return out;
}

void ContentStore::copy_from(const ContentStore& src, std::uint64_t src_addr,
                             std::uint64_t dst_addr, std::uint64_t len) {
  check_range(src_addr, len, "copy source");
  check_range(dst_addr, len, "copy destination");
  if (len == 0) return;
  const std::uint64_t src_end = src_addr + len;
  auto it = src.locate(src_addr);
  // The common case, a range inside one extent (a tensor filled at once, a block copied whole)
  // or in a gap: no snapshot list. The piece is a copy, so src may be *this.
  if (it == src.extents_.end() || it->first >= src_end) {
    erase_range(dst_addr, len);
    return;
  }
  if (it->first <= src_addr && len <= it->second.len() - (src_addr - it->first)) {
    Extent piece = it->second;
    piece.offset += src_addr - it->first;
    piece.set_len(len);
    put(dst_addr, std::move(piece));
    return;
  }
  // Snapshot first: when src is *this, erasing the destination may destroy source extents.
  std::vector<std::pair<std::uint64_t, Extent>> pieces;  // offset from src_addr, extent
  for (; it != src.extents_.end() && it->first < src_end; ++it) {
    const std::uint64_t start = std::max(it->first, src_addr);
    const std::uint64_t stop = std::min(it->first + it->second.len(), src_end);
    Extent piece = it->second;
    piece.offset += start - it->first;
    piece.set_len(stop - start);
    pieces.emplace_back(start - src_addr, std::move(piece));
  }
  auto hint = erase_range(dst_addr, len);
  hint_ok_ = false;  // an insertion moves the extents of a B-tree node
  for (auto& [off, piece] : pieces) {
    hint = std::next(extents_.emplace_hint(hint, dst_addr + off, std::move(piece)));
  }
  coalesce_around(dst_addr, dst_addr + len);
}

std::optional<std::uint64_t> ContentStore::first_difference(std::uint64_t addr,
                                                            const ContentStore& other,
                                                            std::uint64_t other_addr,
                                                            std::uint64_t len) const {
  check_range(addr, len, "compare");
  check_range(other_addr, len, "compare");
  Cursor a(*this, addr);
  Cursor b(other, other_addr);
  std::uint8_t scratch_a[kChunk];
  std::uint8_t scratch_b[kChunk];
  for (std::uint64_t done = 0; done < len;) {
    const std::uint64_t n = std::min({a.run(), b.run(), len - done});
    if (!a.same_origin(b)) {
      for (std::uint64_t off = 0; off < n;) {
        const std::uint64_t m = std::min<std::uint64_t>(kChunk, n - off);
        const std::uint8_t* pa = a.view(off, m, scratch_a);
        const std::uint8_t* pb = b.view(off, m, scratch_b);
        if (std::memcmp(pa, pb, m) != 0) {
          const auto diff = std::mismatch(pa, pa + m, pb);
          return done + off + static_cast<std::uint64_t>(diff.first - pa);
        }
        off += m;
      }
    }
    a.advance(n);
    b.advance(n);
    done += n;
  }
  return std::nullopt;
}

std::uint64_t ContentStore::literal_bytes() const {
  std::unordered_map<const Buffer*, std::vector<std::pair<std::uint64_t, std::uint64_t>>> slices;
  for (const auto& [addr, e] : extents_) {
    if (e.kind() == Extent::Kind::kLiteral) {
      slices[e.buffer()].emplace_back(e.offset, e.offset + e.len());
    }
  }
  std::uint64_t total = 0;
  for (auto& [buffer, ranges] : slices) {
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t covered_to = 0;
    for (const auto& [begin, end] : ranges) {
      const std::uint64_t from = std::max(begin, covered_to);
      if (end > from) total += end - from;
      covered_to = std::max(covered_to, end);
    }
  }
  return total;
}

ContentStore::Map::const_iterator ContentStore::locate(std::uint64_t addr) const {
  if (hint_ok_ && hint_ != extents_.end()) {
    if (addr - hint_->first < hint_->second.len()) return hint_;
    // Walks in address order (a verifier going through blocks by destination) find the next one.
    const auto next = std::next(hint_);
    if (next != extents_.end() && addr - next->first < next->second.len()) return hint_ = next;
  }
  auto it = extents_.upper_bound(addr);
  if (it != extents_.begin()) {
    const auto prev = std::prev(it);
    if (addr - prev->first < prev->second.len()) it = prev;
  }
  hint_ = it;
  hint_ok_ = true;
  return it;
}

bool ContentStore::has_content(std::uint64_t addr, std::uint64_t len) const {
  check_range(addr, len, "has_content");
  if (len == 0 || extents_.empty()) return false;
  const auto it = locate(addr);
  return it != extents_.end() && it->first < addr + len;
}

void ContentStore::put(std::uint64_t addr, Extent e) {
  // One tree walk: a range that is exactly one extent takes the new content in place (a block
  // copied again over a block), else erase_range hands back the insertion point.
  const auto at = extents_.lower_bound(addr);
  if (at != extents_.end() && at->first == addr && at->second.len() == e.len()) {
    at->second = std::move(e);
    coalesce_at(at);
    return;
  }
  const auto next = erase_range(addr, e.len(), at);
  hint_ok_ = false;  // an insertion moves the extents of a B-tree node
  coalesce_at(extents_.emplace_hint(next, addr, std::move(e)));
}

ContentStore::Map::iterator ContentStore::erase_range(std::uint64_t addr, std::uint64_t len) {
  return erase_range(addr, len, extents_.lower_bound(addr));
}

ContentStore::Map::iterator ContentStore::erase_range(std::uint64_t addr, std::uint64_t len,
                                                      Map::iterator it) {
  const std::uint64_t end = addr + len;
  if (len == 0) return it;
  // A suffix [from, its end) of extent `e` (starting at `start`), as its own extent.
  auto suffix = [](const Extent& e, std::uint64_t start, std::uint64_t from) {
    Extent right = e;
    right.set_len(start + e.len() - from);
    right.offset += from - start;  // meaningless but harmless for a fill
    return right;
  };
  if (it != extents_.begin()) {
    const auto p = std::prev(it);
    const std::uint64_t p_end = p->first + p->second.len();
    if (p_end > addr) {  // p straddles addr: keep its part before addr
      hint_ok_ = false;
      if (p_end > end) {  // ... and its part after the range
        Extent right = suffix(p->second, p->first, end);
        p->second.set_len(addr - p->first);
        return extents_.emplace_hint(it, end, std::move(right));
      }
      p->second.set_len(addr - p->first);
    }
  }
  auto last = it;
  while (last != extents_.end() && last->first < end) {
    if (last->first + last->second.len() > end) {  // straddles the end: keep its part after it
      Extent right = suffix(last->second, last->first, end);
      hint_ok_ = false;
      const auto after = extents_.erase(it, std::next(last));
      return extents_.emplace_hint(after, end, std::move(right));
    }
    ++last;
  }
  if (it == last) return last;
  hint_ok_ = false;
  return extents_.erase(it, last);
}

bool ContentStore::continues(const Map::const_iterator& a, const Map::const_iterator& b) {
  const Extent& x = a->second;
  const Extent& y = b->second;
  if (a->first + x.len() != b->first || x.kind() != y.kind() ||
      x.len() > Extent::kMaxLen - y.len()) {
    return false;
  }
  // A fill's offset means nothing; a buffer or stream must go on where x stops.
  return x.origin == y.origin &&
         (x.kind() == Extent::Kind::kFill || x.offset + x.len() == y.offset);
}

void ContentStore::coalesce_at(Map::iterator it) {
  if (it != extents_.begin()) {
    const auto p = std::prev(it);
    if (continues(p, it)) {
      p->second.set_len(p->second.len() + it->second.len());
      hint_ok_ = false;
      it = std::prev(extents_.erase(it));  // p: an erase moves the extents of a B-tree node
    }
  }
  const auto n = std::next(it);
  if (n != extents_.end() && continues(it, n)) {
    it->second.set_len(it->second.len() + n->second.len());
    hint_ok_ = false;
    extents_.erase(n);
  }
}

void ContentStore::coalesce_around(std::uint64_t addr, std::uint64_t end) {
  auto it = extents_.lower_bound(addr);
  if (it != extents_.begin()) --it;
  while (it != extents_.end()) {
    const auto next = std::next(it);
    if (next == extents_.end() || next->first > end) break;
    if (continues(it, next)) {
      it->second.set_len(it->second.len() + next->second.len());
      hint_ok_ = false;
      it = std::prev(extents_.erase(next));  // an erase moves the extents of a B-tree node
    } else {
      it = next;
    }
  }
}

}  // namespace kvsim::model
