// A Chrome trace (the JSON that Perfetto and chrome://tracing load, and that Ascend's profiler
// also writes) of a simulation: one process per device with a track per DMA engine, one process
// for the links with a track per link, plus any span the caller adds (layers, synchronizers).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/fabric.h"
#include "model/fabric_observer.h"

namespace kvsim::sim {

/// Collects spans while attached to a Fabric and writes them as Chrome trace JSON.
class ChromeTrace final : public model::FabricObserver {
 public:
  /// Attaches to `fabric` (detaches in the destructor).
  explicit ChromeTrace(model::Fabric& fabric);
  ~ChromeTrace() override;
  ChromeTrace(const ChromeTrace&) = delete;
  ChromeTrace& operator=(const ChromeTrace&) = delete;

  /// Adds a span [start, end) on track `track` of process `process` (created on first use).
  void add_span(const std::string& process, const std::string& track, const std::string& name,
                model::SimTime start, model::SimTime end,
                std::map<std::string, std::string> args = {});
  /// Adds an instant event.
  void add_instant(const std::string& process, const std::string& track, const std::string& name,
                   model::SimTime at);
  /// The trace as JSON text.
  std::string json() const;
  /// Writes json() to `path`; throws std::runtime_error naming the path if it cannot.
  void write(const std::string& path) const;
  std::size_t span_count() const { return events_.size(); }

  void on_processing(const model::EngineRef& engine, std::uint64_t batch, model::SimTime start,
                     model::SimTime end, std::size_t descriptors) override;
  void on_data(const model::EngineRef& engine, std::uint64_t batch, model::SimTime start,
               model::SimTime end, std::uint64_t bytes, const std::vector<std::uint32_t>& links,
               bool completed) override;
  void on_link_event(std::uint32_t link, model::SimTime at, const model::LinkEvent& event) override;

 private:
  struct Event {
    int pid;
    int tid;
    std::string name;
    model::SimTime start;
    model::SimTime end;  ///< == start for an instant
    bool instant;
    std::map<std::string, std::string> args;
  };
  int pid(const std::string& process);
  int tid(int pid, const std::string& track);

  model::Fabric& fabric_;
  std::vector<Event> events_;
  std::map<std::string, int> pids_;
  std::map<std::pair<int, std::string>, int> tids_;
};

}  // namespace kvsim::sim
