#include "cpp/wire/wire.h"

namespace kvsim::cpp::wire {

Writer& Writer::u64s(const std::vector<std::uint64_t>& v) {
  u64(v.size());
  for (std::uint64_t x : v) u64(x);
  return *this;
}

Writer& Writer::i64s(const std::vector<std::int64_t>& v) {
  u64(v.size());
  for (std::int64_t x : v) i64(x);
  return *this;
}

Writer& Writer::u32s(const std::vector<std::uint32_t>& v) {
  u64(v.size());
  for (std::uint32_t x : v) u32(x);
  return *this;
}

Writer& Writer::options(const Options& o) {
  u64(o.size());
  for (const auto& [k, v] : o) str(k).str(v);
  return *this;
}

Writer& Writer::desc(const Desc& d) {
  return u32(d.placement).u32(d.num_tensors).i32(d.data_type).i64s(d.shape);
}

Writer& Writer::cache(const CacheRef& c) {
  return i64(c.cache_id).u64s(c.tensor_addrs).desc(c.desc);
}

Writer& Writer::index(const Index& i) {
  return u64(i.cluster_id).i64(i.cache_id).u32(i.batch_index);
}

Writer& Writer::ext(const ExtParam& e) {
  return i32(e.src_first)
      .i32(e.src_second)
      .i32(e.dst_first)
      .i32(e.dst_second)
      .u8(e.tensor_num_per_layer);
}

Writer& Writer::clusters(const std::vector<Cluster>& cs) {
  u64(cs.size());
  for (const Cluster& c : cs) {
    u64(c.remote_cluster_id).i32(c.remote_role_type);
    for (const auto* list : {&c.local, &c.remote}) {
      u64(list->size());
      for (const IpAddress& a : *list) str(a.ip).u16(a.port);
    }
  }
  return *this;
}

std::uint64_t Reader::le(int n) {
  if (data_.size() - pos_ < static_cast<std::size_t>(n)) throw WireError("truncated frame");
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
  }
  pos_ += static_cast<std::size_t>(n);
  return v;
}

std::size_t Reader::count() {
  const std::uint64_t n = u64();
  if (n > data_.size() - pos_) throw WireError("a length past the end of the frame");
  return static_cast<std::size_t>(n);
}

std::string Reader::str() {
  const std::size_t n = count();
  std::string s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::vector<std::uint64_t> Reader::u64s() {
  const std::uint64_t n = u64();
  if (n > (data_.size() - pos_) / 8) throw WireError("a list past the end of the frame");
  std::vector<std::uint64_t> v;
  v.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(u64());
  return v;
}

std::vector<std::int64_t> Reader::i64s() {
  const std::uint64_t n = u64();
  if (n > (data_.size() - pos_) / 8) throw WireError("a list past the end of the frame");
  std::vector<std::int64_t> v;
  v.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(i64());
  return v;
}

std::vector<std::uint32_t> Reader::u32s() {
  const std::uint64_t n = u64();
  if (n > (data_.size() - pos_) / 4) throw WireError("a list past the end of the frame");
  std::vector<std::uint32_t> v;
  v.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(u32());
  return v;
}

Options Reader::options() {
  const std::uint64_t n = u64();
  if (n > data_.size() - pos_) throw WireError("a map past the end of the frame");
  Options o;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string k = str();
    o[k] = str();
  }
  return o;
}

Desc Reader::desc() {
  Desc d;
  d.placement = u32();
  d.num_tensors = u32();
  d.data_type = i32();
  d.shape = i64s();
  return d;
}

CacheRef Reader::cache() {
  CacheRef c;
  c.cache_id = i64();
  c.tensor_addrs = u64s();
  c.desc = desc();
  return c;
}

Index Reader::index() {
  Index i;
  i.cluster_id = u64();
  i.cache_id = i64();
  i.batch_index = u32();
  return i;
}

ExtParam Reader::ext() {
  ExtParam e;
  e.src_first = i32();
  e.src_second = i32();
  e.dst_first = i32();
  e.dst_second = i32();
  e.tensor_num_per_layer = u8();
  return e;
}

std::vector<Cluster> Reader::clusters() {
  const std::uint64_t n = u64();
  if (n > data_.size() - pos_) throw WireError("a list past the end of the frame");
  std::vector<Cluster> out;
  for (std::uint64_t i = 0; i < n; ++i) {
    Cluster c;
    c.remote_cluster_id = u64();
    c.remote_role_type = i32();
    for (auto* list : {&c.local, &c.remote}) {
      const std::uint64_t m = u64();
      if (m > data_.size() - pos_) throw WireError("a list past the end of the frame");
      for (std::uint64_t j = 0; j < m; ++j) {
        IpAddress a;
        a.ip = str();
        a.port = u16();
        list->push_back(a);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

void Reader::end() const {
  if (pos_ != data_.size()) throw WireError("trailing bytes in the frame");
}

namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

std::string request_frame(Op op, const std::string& payload) {
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(payload.size() + 4));
  put_u32(out, static_cast<std::uint32_t>(op));
  out += payload;
  return out;
}

std::optional<Request> take_request(std::string& buffer) {
  if (buffer.size() < 4) return std::nullopt;
  std::uint32_t size = 0;
  for (int i = 0; i < 4; ++i) {
    size |= static_cast<std::uint32_t>(static_cast<unsigned char>(buffer[i])) << (8 * i);
  }
  if (size < 4 || size > kMaxFrame + 4)
    throw WireError("a request of " + std::to_string(size) + " bytes");
  if (buffer.size() < 4 + static_cast<std::size_t>(size)) return std::nullopt;
  std::uint32_t op = 0;
  for (int i = 0; i < 4; ++i) {
    op |= static_cast<std::uint32_t>(static_cast<unsigned char>(buffer[4 + i])) << (8 * i);
  }
  if (op < static_cast<std::uint32_t>(Op::kHello) || op >= static_cast<std::uint32_t>(Op::kLast)) {
    throw WireError("unknown request " + std::to_string(op));
  }
  Request r;
  r.op = static_cast<Op>(op);
  r.payload = buffer.substr(8, size - 4);
  buffer.erase(0, 4 + static_cast<std::size_t>(size));
  return r;
}

std::string reply_frame(std::uint64_t now_ps, const std::string& payload) {
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(payload.size() + 8));
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((now_ps >> (8 * i)) & 0xFF));
  out += payload;
  return out;
}

}  // namespace kvsim::cpp::wire
