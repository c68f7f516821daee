// Byte-exact, sparse memory content kept as extents: a copy costs O(extents), not O(bytes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <absl/container/btree_map.h>

namespace kvsim::model {

/// Content of one address space. Each extent is either literal bytes (a shared, immutable buffer
/// plus an offset, so copies share storage), a generated pattern (seed plus stream offset, so
/// gigabytes cost a few words) or one repeated byte. Bytes never written read as kUnwrittenByte.
/// A range [addr, addr+len) must satisfy addr+len <= 2^64-1, else calls throw kOutOfRange;
/// zero-length calls are no-ops.
class ContentStore {
 public:
  /// What never-written bytes read as (0xDB: "dead byte", easy to spot in a dump).
  static constexpr std::uint8_t kUnwrittenByte = 0xDB;
  /// Writes of one repeated byte at least this long are stored as fills.
  static constexpr std::uint64_t kSmallestUniformFill = 256;

  /// Byte `i` of the generated stream `seed` (deterministic, platform independent).
  static std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t i);

  /// Stores a copy of `len` literal bytes at `addr` (as a fill if they are one repeated byte
  /// and at least kSmallestUniformFill long).
  void write(std::uint64_t addr, const std::uint8_t* data, std::uint64_t len);
  /// Fills [addr, addr+len) with generated stream `seed`, starting at stream offset 0.
  void fill_pattern(std::uint64_t addr, std::uint64_t len, std::uint64_t seed);
  /// Fills [addr, addr+len) with one byte value.
  void fill(std::uint64_t addr, std::uint64_t len, std::uint8_t value);
  /// Forgets [addr, addr+len): it reads as kUnwrittenByte again.
  void clear(std::uint64_t addr, std::uint64_t len);
  /// Reads [addr, addr+len) into `out` (which has room for len bytes).
  void read(std::uint64_t addr, std::uint8_t* out, std::uint64_t len) const;
  std::vector<std::uint8_t> read(std::uint64_t addr, std::uint64_t len) const;
  /// Copies [src_addr, src_addr+len) of `src` to `dst_addr` here. `src` may be *this, and the
  /// ranges may overlap (memmove semantics). O(extents in the source range).
  void copy_from(const ContentStore& src, std::uint64_t src_addr, std::uint64_t dst_addr,
                 std::uint64_t len);
  /// Offset of the first byte where [addr, addr+len) here differs from [other_addr, ...) of
  /// `other`, or nullopt if equal. Extents with the same origin compare without reading bytes.
  std::optional<std::uint64_t> first_difference(std::uint64_t addr, const ContentStore& other,
                                                std::uint64_t other_addr, std::uint64_t len) const;

  /// True if any byte of [addr, addr+len) was written (and not cleared since): a copy from or
  /// over a range without content changes nothing there.
  bool has_content(std::uint64_t addr, std::uint64_t len) const;
  /// Number of extents held (a measure of fragmentation and of copy cost).
  std::size_t extent_count() const { return extents_.size(); }
  /// Distinct literal buffer bytes referenced by extents: a slice copied N times counts once.
  /// (A buffer partly overwritten stays allocated whole until no extent refers to it.)
  std::uint64_t literal_bytes() const;

 private:
  /// Literal bytes, shared by every extent that holds a slice of them: a copy shares, never
  /// duplicates (the count is atomic because copied stores may live on other threads).
  struct Buffer {
    mutable std::atomic<std::size_t> refs{1};
    std::vector<std::uint8_t> bytes;
  };
  /// A run of content: 24 bytes, so that a B-tree node holds many (length and kind share a word).
  class Extent {
   public:
    enum class Kind : std::uint8_t { kLiteral, kPattern, kFill };
    /// The longest extent; longer content is stored as several.
    static constexpr std::uint64_t kMaxLen = (std::uint64_t{1} << 62) - 1;

    Extent() = default;
    /// `from`: a Buffer* whose reference this extent takes over (kLiteral), the pattern seed
    /// (kPattern) or the byte value (kFill); `at`: into the buffer, or into the stream.
    Extent(Kind kind, std::uint64_t len, std::uint64_t from, std::uint64_t at = 0)
        : bits_(static_cast<std::uint64_t>(kind) << 62 | len), offset(at), origin(from) {}
    Extent(const Extent& o) : bits_(o.bits_), offset(o.offset), origin(o.origin) { retain(); }
    Extent(Extent&& o) noexcept : bits_(o.bits_), offset(o.offset), origin(o.origin) {
      o.bits_ = static_cast<std::uint64_t>(Kind::kFill) << 62;
    }
    Extent& operator=(const Extent& o) {
      if (this != &o) {
        Extent copy(o);
        swap(copy);
      }
      return *this;
    }
    Extent& operator=(Extent&& o) noexcept {
      Extent moved(std::move(o));
      swap(moved);
      return *this;
    }
    ~Extent() { release(); }

    std::uint64_t len() const { return bits_ & kMaxLen; }
    void set_len(std::uint64_t len) { bits_ = (bits_ & ~kMaxLen) | len; }
    Kind kind() const { return static_cast<Kind>(bits_ >> 62); }
    const Buffer* buffer() const { return reinterpret_cast<const Buffer*>(origin); }
    std::uint64_t seed() const { return origin; }
    std::uint8_t fill_value() const { return static_cast<std::uint8_t>(origin); }

   private:
    void swap(Extent& o) noexcept {
      std::swap(bits_, o.bits_);
      std::swap(offset, o.offset);
      std::swap(origin, o.origin);
    }
    void retain() const {
      if (kind() == Kind::kLiteral) buffer()->refs.fetch_add(1, std::memory_order_relaxed);
    }
    void release() const {
      if (kind() == Kind::kLiteral && buffer()->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        delete buffer();
      }
    }
    std::uint64_t bits_ = static_cast<std::uint64_t>(Kind::kFill) << 62;  ///< kind, length

   public:
    std::uint64_t offset = 0;
    std::uint64_t origin = 0;
  };

  /// Walks extents and gaps in address order (defined in the .cpp).
  class Cursor;

  /// Throws kOutOfRange if addr+len does not fit in 64 bits.
  static void check_range(std::uint64_t addr, std::uint64_t len, const char* what);
  /// Replaces [addr, addr+e.len) with `e`.
  void put(std::uint64_t addr, Extent e);
  /// A B-tree: extents sit together in nodes, so a lookup among millions of (block-sized)
  /// extents touches a few cache lines, not a node per level. Inserts and erases invalidate
  /// iterators (hint_ is dropped at each). absl::btree_map with 1 KiB nodes (31 extents) instead
  /// of its fixed 256 B (7): absl::btree_map is this same type with TargetNodeSize 256, which
  /// only its internal namespace lets one change. On the scattered 32k-token Qwen3 run the larger
  /// nodes took 15 % off the wall time (bench/scale_bench.sh).
  using Map = absl::container_internal::btree_map_container<
      absl::container_internal::btree<absl::container_internal::map_params<
          std::uint64_t, Extent, std::less<std::uint64_t>,
          std::allocator<std::pair<const std::uint64_t, Extent>>, 1024, false>>>;
  /// Removes all content in [addr, addr+len), splitting boundary extents; returns the first
  /// extent at or after addr+len (the insertion point for the range). One tree walk if empty.
  Map::iterator erase_range(std::uint64_t addr, std::uint64_t len);
  /// The same, given extents_.lower_bound(addr).
  Map::iterator erase_range(std::uint64_t addr, std::uint64_t len, Map::iterator lower);
  /// True if extent b starts where a ends and continues it (same buffer or stream, or fill).
  static bool continues(const Map::const_iterator& a, const Map::const_iterator& b);
  /// Merges `it` with the neighbours it continues (enough after replacing one range: extents
  /// that were not merged before still do not continue each other).
  void coalesce_at(Map::iterator it);
  /// Merges every adjacent pair in [addr, end] that continue each other.
  void coalesce_around(std::uint64_t addr, std::uint64_t end);
  /// The extent holding `addr`, else the first after it (end() if none).
  Map::const_iterator locate(std::uint64_t addr) const;

  Map extents_;  ///< key: start address; extents never overlap
  // The extent locate() found last: copies and checks mostly read one tensor's extent again, or
  // the next one. Every insert and erase drops it.
  mutable Map::const_iterator hint_{};
  mutable bool hint_ok_ = false;

 public:
  ContentStore() = default;
  ContentStore(const ContentStore& o) : extents_(o.extents_) {}
  ContentStore& operator=(const ContentStore& o) {
    extents_ = o.extents_;
    hint_ok_ = false;
    return *this;
  }
  ContentStore(ContentStore&& o) noexcept : extents_(std::move(o.extents_)) { o.hint_ok_ = false; }
  ContentStore& operator=(ContentStore&& o) noexcept {
    extents_ = std::move(o.extents_);
    hint_ok_ = o.hint_ok_ = false;
    return *this;
  }
  ~ContentStore() = default;
};

}  // namespace kvsim::model
