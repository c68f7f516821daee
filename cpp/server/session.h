// The world's side of one program's calls: it decodes a request of the wire protocol, runs it on
// that program's ACL runtime and LlmDataDist engines, and encodes the reply. The in-process
// library calls it directly; the world's server calls it from the job of a launched program.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "cpp/engine/acl_runtime.h"
#include "cpp/engine/data_dist_engine.h"
#include "cpp/wire/wire.h"
#include "impl/directory.h"
#include "impl/platform.h"

namespace kvsim::cpp {

class Session {
 public:
  Session(impl::Platform& platform, impl::Directory& directory);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs one request (not kHello) and returns its reply payload; wire::WireError if the
  /// payload does not decode. Blocking calls wait in simulated time for the caller (a job, or
  /// the driver in process).
  std::string handle(wire::Op op, const std::string& payload);
  /// The program has ended: the instances it still holds are abandoned (it died with them; a
  /// program that returns from main has destroyed its own, which finalized them).
  void end(const std::string& why);

 private:
  std::string acl(wire::Reader& in);
  DataDistEngine* engine(std::uint64_t handle);

  impl::Platform& platform_;
  impl::Directory& directory_;
  AclRuntime acl_;
  std::map<std::uint64_t, std::unique_ptr<DataDistEngine>> engines_;
  std::uint64_t next_handle_ = 1;
};

}  // namespace kvsim::cpp
