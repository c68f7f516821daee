#include "impl/transfer_job.h"

#include <exception>
#include <string>
#include <utility>

#include "impl/layer_transfer.h"

namespace kvsim::impl {

namespace {

// Python's IndexError in the job thread (§3.2 [I]).
class JobIndexError : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

LayerCall make_call(const TransferJobSpec& spec, const AnyTransferConfig& config,
                    std::int64_t layer) {
  LayerCall call;
  call.src_cache_id = spec.src_cache_id;
  call.dst_cluster_id = dst_cluster_id_of(config);
  if (const auto* plain = std::get_if<TransferConfig>(&config)) {
    call.transfer = make_layer_transfer(spec.plan, *plain, layer);
    return call;
  }
  const auto& keyed = std::get<TransferWithCacheKeyConfig>(config);
  const LayerRange dst = *keyed.dst_layer_range();
  // list(dst_layer_range)[L] with the absolute L (§3.2 [I]).
  if (layer >= dst.size()) {
    throw JobIndexError("IndexError: range object index out of range (dst_layer_range " +
                        to_string(dst) + "[" + std::to_string(layer) + "])");
  }
  call.transfer.layer_index = static_cast<std::uint64_t>(layer);
  call.transfer.tensor_num_per_layer = kTensorsPerLayer;
  call.transfer.src_batch_index = keyed.src_batch_index();
  call.transfer.src_blocks = spec.plan.src_blocks;
  call.transfer.dst_blocks = spec.plan.dst_blocks;
  call.transfer.dst_block_memory_size = spec.plan.dst_block_memory_size;
  call.remote = RemoteKeyTarget{keyed.cache_key(), static_cast<std::uint64_t>(dst.at(layer))};
  return call;
}

// The job thread dies (§3.2 [I]): diagnose; strict mode fails the layer's configs.
void die(DataDistCore& core, TaskState& task, const std::vector<const AnyTransferConfig*>& covering,
         std::int64_t layer, bool in_synchronizer, const std::string& what) {
  const std::string where = in_synchronizer ? "synchronize_layer(" + std::to_string(layer) + ")"
                                            : "the transfer of layer " + std::to_string(layer);
  const Diagnostic d =
      core.record(DiagnosticKind::kSynchronizerException,
                  where + " raised: " + what + "; the job ends and its results stay None",
                  std::nullopt, task.id);
  task.diagnostics.add(d);
  if (core.strict()) {
    for (const AnyTransferConfig* c : covering) {
      task.results[dst_cluster_id_of(*c)] = LLMStatusCode::LLM_FAILED;
    }
  }
}

void run_layers(const TransferJobSpec& spec) {
  DataDistCore& core = *spec.core;
  TaskState& task = *spec.task;
  const CallContext context{&task.diagnostics, task.id};
  std::vector<const AnyTransferConfig*> covering;
  for (std::int64_t layer = 0; layer < spec.plan.num_layers; ++layer) {
    covering.clear();
    for (const AnyTransferConfig& c : spec.configs) {
      if (src_layer_range_of(c)->contains(layer)) covering.push_back(&c);
    }
    if (covering.empty()) continue;
    const AnyTransferConfig* current = nullptr;
    try {
      if (!spec.synchronizer->synchronize_layer(layer, std::nullopt)) {
        // The library's "error code to be added" (§3.2).
        for (const AnyTransferConfig* c : covering) {
          task.results[dst_cluster_id_of(*c)] = LLMStatusCode::LLM_PARAM_INVALID;
        }
        return;
      }
      for (const AnyTransferConfig* c : covering) {
        current = c;
        const LLMStatusCode ret = transfer_layer(core, make_call(spec, *c, layer), context);
        if (ret != LLMStatusCode::LLM_SUCCESS) {
          task.results[dst_cluster_id_of(*c)] = ret;
          return;
        }
        if (layer == src_layer_range_of(*c)->stop - 1) {
          task.results[dst_cluster_id_of(*c)] = LLMStatusCode::LLM_SUCCESS;
        }
      }
    } catch (const std::exception& e) {
      die(core, task, covering, layer, current == nullptr, e.what());
      return;
    } catch (...) {
      die(core, task, covering, layer, current == nullptr, "a non-std exception");
      return;
    }
  }
}

}  // namespace

void start_transfer_job(TransferJobSpec spec) {
  auto shared = std::make_shared<TransferJobSpec>(std::move(spec));
  Platform& platform = shared->core->platform();
  platform.spawn("transfer_cache_async_task_" + std::to_string(shared->task->id), [shared] {
    run_layers(*shared);
    --shared->core->tasks_in_flight;
    for (const std::shared_ptr<Link>& link : shared->v1_links) --link->active_v1_transfers;
    shared->task->done->set();
  });
}

}  // namespace kvsim::impl
