#include "sim/chrome_trace.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

namespace kvsim::sim {

ChromeTrace::ChromeTrace(model::Fabric& fabric) : fabric_(fabric) {
  fabric_.set_observer(this);
}

ChromeTrace::~ChromeTrace() {
  fabric_.set_observer(nullptr);
}

int ChromeTrace::pid(const std::string& process) {
  return pids_.emplace(process, static_cast<int>(pids_.size()) + 1).first->second;
}

int ChromeTrace::tid(int p, const std::string& track) {
  return tids_.emplace(std::make_pair(p, track), static_cast<int>(tids_.size()) + 1).first->second;
}

void ChromeTrace::add_span(const std::string& process, const std::string& track,
                           const std::string& name, model::SimTime start, model::SimTime end,
                           std::map<std::string, std::string> args) {
  const int p = pid(process);
  events_.push_back({p, tid(p, track), name, start, end, false, std::move(args)});
}

void ChromeTrace::add_instant(const std::string& process, const std::string& track,
                              const std::string& name, model::SimTime at) {
  const int p = pid(process);
  events_.push_back({p, tid(p, track), name, at, at, true, {}});
}

void ChromeTrace::on_processing(const model::EngineRef& engine, std::uint64_t batch,
                                model::SimTime start, model::SimTime end, std::size_t descriptors) {
  add_span(fabric_.topology().device_name(engine.device), "dma" + std::to_string(engine.engine),
           "descriptors", start, end,
           {{"batch", std::to_string(batch)}, {"descriptors", std::to_string(descriptors)}});
}

void ChromeTrace::on_data(const model::EngineRef& engine, std::uint64_t batch, model::SimTime start,
                          model::SimTime end, std::uint64_t bytes,
                          const std::vector<std::uint32_t>& links, bool completed) {
  const std::string name = completed ? "data" : "data (cut by fault)";
  std::map<std::string, std::string> args{{"batch", std::to_string(batch)},
                                          {"bytes", std::to_string(bytes)}};
  add_span(fabric_.topology().device_name(engine.device), "dma" + std::to_string(engine.engine),
           name, start, end, args);
  for (std::uint32_t l : links)
    add_span("links", fabric_.topology().links()[l].name, name, start, end, args);
}

void ChromeTrace::on_link_event(std::uint32_t link, model::SimTime at,
                                const model::LinkEvent& event) {
  const char* what = event.kind == model::LinkEvent::Kind::kDown ? "down"
                     : event.kind == model::LinkEvent::Kind::kUp ? "up"
                                                                 : "degrade";
  add_instant("links", fabric_.topology().links()[link].name, what, at);
}

std::string ChromeTrace::json() const {
  nlohmann::ordered_json trace;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& [name, p] : pids_) {
    list.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", p}, {"args", {{"name", name}}}});
  }
  for (const auto& [key, t] : tids_) {
    list.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", key.first},
                    {"tid", t},
                    {"args", {{"name", key.second}}}});
  }
  // Chrome traces count in microseconds; keep picosecond precision as fractions.
  auto us = [](model::SimTime t) { return static_cast<double>(t) / 1e6; };
  for (const Event& e : events_) {
    nlohmann::ordered_json j = {{"name", e.name},
                                {"ph", e.instant ? "i" : "X"},
                                {"pid", e.pid},
                                {"tid", e.tid},
                                {"ts", us(e.start)}};
    if (e.instant)
      j["s"] = "t";
    else
      j["dur"] = us(e.end - e.start);
    if (!e.args.empty()) j["args"] = e.args;
    list.push_back(std::move(j));
  }
  trace["traceEvents"] = std::move(list);
  trace["displayTimeUnit"] = "ns";
  return trace.dump();
}

void ChromeTrace::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write trace to '" + path + "'");
  out << json();
  if (!out) throw std::runtime_error("failed writing trace to '" + path + "'");
}

}  // namespace kvsim::sim
