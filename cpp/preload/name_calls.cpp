// Host names of a launched program: gethostname and uname give its simulated host's name, and
// getaddrinfo, gethostbyname and gethostbyname_r resolve the simulated hosts' names to their
// IPv4 addresses. The launcher passes the table: KVSIM_HOSTNAME (this program's host) and
// KVSIM_HOSTS ("name=a.b.c.d,..."). Why: c10d's gloo device binds to whatever
// getaddrinfo(gethostname()) gives (ProcessGroupGloo::createDefaultDevice), and serving
// engines publish gethostbyname(gethostname()) to their peers; the machine's own name resolves
// to 127.0.1.1, which means another host in the simulated network.
//
// Numeric addresses, a null node and "localhost" go to the C library, which needs no network
// for them. Any other name that is not a simulated host gets EAI_NONAME (HOST_NOT_FOUND):
// the machine's /etc/hosts and DNS are not the cluster's, and a lookup must not leave the world.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cpp/preload/real_calls.h"

namespace {

using kvsim::cpp::preload::simulated;

struct Host {
  std::string name;
  in_addr ip{};
};

/// The launch's host table, read once from the environment.
const std::vector<Host>& hosts() {
  static const auto* table = [] {
    auto* out = new std::vector<Host>();
    const char* spec = std::getenv("KVSIM_HOSTS");
    std::string rest = spec != nullptr ? spec : "";
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string item = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      const std::size_t eq = item.find('=');
      Host h;
      if (eq == std::string::npos || inet_pton(AF_INET, item.c_str() + eq + 1, &h.ip) != 1) {
        continue;
      }
      h.name = item.substr(0, eq);
      out->push_back(std::move(h));
    }
    return out;
  }();
  return *table;
}

const char* own_name() {
  static const char* name = std::getenv("KVSIM_HOSTNAME");
  return name;
}

}  // namespace

namespace kvsim::cpp::preload {

std::uint32_t own_ipv4() {
  if (own_name() == nullptr) return 0;
  for (const Host& h : hosts()) {
    if (strcasecmp(h.name.c_str(), own_name()) == 0) return ntohl(h.ip.s_addr);
  }
  return 0;
}

}  // namespace kvsim::cpp::preload

namespace {

bool named(const char* node) {
  return simulated() && own_name() != nullptr && node != nullptr;
}

/// The simulated host called `node` (case-insensitive, as DNS names are), or nullptr.
const Host* lookup(const char* node) {
  for (const Host& h : hosts()) {
    if (strcasecmp(h.name.c_str(), node) == 0) return &h;
  }
  return nullptr;
}

/// True if the C library answers `node` itself: an address literal or localhost.
bool for_c_library(const char* node) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, node, &v4) == 1 || inet_pton(AF_INET6, node, &v6) == 1 ||
         strcasecmp(node, "localhost") == 0 || strncasecmp(node, "localhost.", 10) == 0;
}

/// The port `service` names, numeric only (services by name need /etc/services: EAI_SERVICE).
bool port_of(const char* service, std::uint16_t& port) {
  port = 0;
  if (service == nullptr) return true;
  char* end = nullptr;
  const unsigned long v = std::strtoul(service, &end, 10);
  if (*service == '\0' || *end != '\0' || v > 65535) return false;
  port = static_cast<std::uint16_t>(v);
  return true;
}

/// One addrinfo in one malloc'd block with its address after it, as glibc lays them out, so
/// that the C library's freeaddrinfo frees ours.
addrinfo* entry(const Host& h, int family, int socktype, int protocol, std::uint16_t port) {
  const std::size_t len = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  auto* ai = static_cast<addrinfo*>(std::calloc(1, sizeof(addrinfo) + len));
  if (ai == nullptr) return nullptr;
  auto* addr = reinterpret_cast<sockaddr*>(ai + 1);
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(addr);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    in6->sin6_addr.s6_addr[10] = 0xff;
    in6->sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(in6->sin6_addr.s6_addr + 12, &h.ip, 4);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(addr);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr = h.ip;
  }
  ai->ai_family = family;
  ai->ai_socktype = socktype;
  ai->ai_protocol = protocol;
  ai->ai_addrlen = static_cast<socklen_t>(len);
  ai->ai_addr = addr;
  return ai;
}

// getaddrinfo for a simulated host: IPv4 (or, asked for AF_INET6 with AI_V4MAPPED, mapped).
int resolve(const Host& h, const char* service, const addrinfo* hints, addrinfo** res) {
  const int family = hints != nullptr ? hints->ai_family : AF_UNSPEC;
  const int flags = hints != nullptr ? hints->ai_flags : 0;
  int out_family = AF_INET;
  if (family == AF_INET6) {
    if ((flags & AI_V4MAPPED) == 0) return EAI_NONAME;  // the host has no IPv6 address
    out_family = AF_INET6;
  } else if (family != AF_INET && family != AF_UNSPEC) {
    return EAI_FAMILY;
  }
  std::uint16_t port = 0;
  if (!port_of(service, port)) return EAI_SERVICE;
  const int socktype = hints != nullptr ? hints->ai_socktype : 0;
  const int protocol = hints != nullptr ? hints->ai_protocol : 0;
  // Without a socket type glibc lists stream, datagram and raw; engines ask for one.
  std::vector<std::pair<int, int>> kinds;
  if (socktype != 0) {
    kinds.emplace_back(socktype, protocol);
  } else {
    kinds = {{SOCK_STREAM, IPPROTO_TCP}, {SOCK_DGRAM, IPPROTO_UDP}, {SOCK_RAW, 0}};
  }
  addrinfo* head = nullptr;
  addrinfo** tail = &head;
  for (const auto& [type, proto] : kinds) {
    addrinfo* ai = entry(h, out_family, type, proto, port);
    if (ai == nullptr) {
      freeaddrinfo(head);
      return EAI_MEMORY;
    }
    *tail = ai;
    tail = &ai->ai_next;
  }
  if ((flags & AI_CANONNAME) != 0 && head != nullptr) head->ai_canonname = strdup(h.name.c_str());
  *res = head;
  return 0;
}

}  // namespace

extern "C" {

int gethostname(char* name, size_t len) {
  if (!simulated() || own_name() == nullptr) return KVSIM_REAL(gethostname)(name, len);
  const std::size_t n = std::strlen(own_name());
  if (len <= n) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(name, own_name(), n + 1);
  return 0;
}

int uname(struct utsname* buf) {
  const int r = KVSIM_REAL(uname)(buf);
  if (r == 0 && simulated() && own_name() != nullptr) {
    std::strncpy(buf->nodename, own_name(), sizeof(buf->nodename) - 1);
    buf->nodename[sizeof(buf->nodename) - 1] = '\0';
  }
  return r;
}

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                struct addrinfo** res) {
  if (!named(node) || for_c_library(node))
    return KVSIM_REAL(getaddrinfo)(node, service, hints, res);
  if (res == nullptr) return EAI_SYSTEM;
  const Host* h = lookup(node);
  return h == nullptr ? EAI_NONAME : resolve(*h, service, hints, res);
}

int gethostbyname_r(const char* name, struct hostent* ret, char* buf, size_t len,
                    struct hostent** result, int* h_errnop) {
  if (!named(name) || for_c_library(name)) {
    return KVSIM_REAL(gethostbyname_r)(name, ret, buf, len, result, h_errnop);
  }
  *result = nullptr;
  const Host* h = lookup(name);
  if (h == nullptr) {
    if (h_errnop != nullptr) *h_errnop = HOST_NOT_FOUND;
    return 0;
  }
  // buf holds: the address, the address list (address, null), the empty alias list, the name.
  const std::size_t need = sizeof(in_addr) + 3 * sizeof(char*) + h->name.size() + 1;
  if (buf == nullptr || len < need + alignof(char*)) return ERANGE;
  char* p = buf;
  std::memcpy(p, &h->ip, sizeof(in_addr));
  char* addr = p;
  p += sizeof(in_addr);
  p += (alignof(char*) - reinterpret_cast<std::uintptr_t>(p) % alignof(char*)) % alignof(char*);
  auto** list = reinterpret_cast<char**>(p);
  list[0] = addr;
  list[1] = nullptr;
  list[2] = nullptr;  // aliases
  p += 3 * sizeof(char*);
  std::memcpy(p, h->name.c_str(), h->name.size() + 1);
  ret->h_name = p;
  ret->h_aliases = list + 2;
  ret->h_addrtype = AF_INET;
  ret->h_length = sizeof(in_addr);
  ret->h_addr_list = list;
  *result = ret;
  return 0;
}

struct hostent* gethostbyname(const char* name) {
  if (!named(name) || for_c_library(name)) return KVSIM_REAL(gethostbyname)(name);
  static thread_local hostent entry_out;
  static thread_local char buf[512];
  hostent* result = nullptr;
  int error = 0;
  if (gethostbyname_r(name, &entry_out, buf, sizeof(buf), &result, &error) != 0 ||
      result == nullptr) {
    h_errno = HOST_NOT_FOUND;
    return nullptr;
  }
  return result;
}

}  // extern "C"
