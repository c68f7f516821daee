#include "properties/api_model.h"

#include "properties/prop_support.h"

namespace kvsim::properties::api_model {

void showValue(const ModelKey& k, std::ostream& os) {
  os << "CacheKey(" << cluster_of(k.cluster_process) << ", req " << k.req << ", prefix " << k.prefix
     << ")";
}

const std::vector<int>& Model::table_of(int a, int b) {
  auto& t = table[a][b];
  if (!t) {
    t.emplace();
    for (std::size_t i = 0; i < caches.size(); ++i) {
      if (caches[i].live && caches[i].process == b) t->push_back(static_cast<int>(i));
    }
  }
  return *t;
}

// hixl link_msg_handler.cc LinkMsgHandler::LinkCluster: the server's ExchangeInfoProcess runs
// with force_link (the client holds no entity), destroying an entity it still holds for the
// client and making a new one; hixl_transfer_engine.cc HixlTransferEngine::LinkCluster makes the
// client's entity only. Each new side starts with an unread remote table.
void Model::connect(int client, int server) {
  const auto side = [&](int a, int b) {
    linked[a][b] = true;
    ++link_generation[a][b];
    table[a][b].reset();
  };
  side(client, server);
  if (!hixl) side(server, client);
}

std::optional<std::pair<int, int>> Model::find_key(int process, const ModelKey& key) const {
  for (std::size_t i = 0; i < caches.size(); ++i) {
    const ModelCache& c = caches[i];
    if (c.process != process || !(c.live || c.pending)) continue;
    for (std::size_t r = 0; r < c.row_keys.size(); ++r) {
      if (c.row_keys[r] == std::optional<ModelKey>(key)) {
        return std::make_pair(static_cast<int>(i), static_cast<int>(r));
      }
    }
  }
  return std::nullopt;
}

void Model::remove_key(int process, const ModelKey& key) {
  const auto found = find_key(process, key);
  if (!found) return;
  ModelCache& c = caches[static_cast<std::size_t>(found->first)];
  if (!c.allocated) return;  // CacheManager::RemoveCacheKey leaves a registered cache's keys
  used_keys.push_back(key);
  c.row_keys[static_cast<std::size_t>(found->second)].reset();
  if (c.pending && !c.has_keys()) c.pending = false;
}

bool Model::v1_transfer_on_link(int a, int b) const {
  // Tasks are the prompt's: they count on the prompt's side to a decoder, which is either end.
  if ((a == 0) == (b == 0)) return false;
  const int peer = a == 0 ? b : a;
  if (!linked[0][peer]) return false;
  const std::pair<int, int> link{peer, link_generation[0][peer]};
  return std::any_of(tasks.begin(), tasks.end(), [&](const ModelTask& t) {
    return !t.done && std::find(t.v1_links.begin(), t.v1_links.end(), link) != t.v1_links.end();
  });
}

ModelCache Model::fresh(int process, bool blocks, bool allocated, bool host) const {
  ModelCache c;
  c.process = process;
  c.blocks = blocks;
  c.allocated = allocated;
  c.host = host;
  // §4: DEVICE defaults to remote accessible, HOST not; link_clusters leaves the default alone
  // (hixl v2/cache_manager.py: only link(), the comm-domain API, sets set_is_call_linked).
  c.remote_accessible = !host;
  const int handle = static_cast<int>(caches.size());
  for (int t = 0; t < tensors(); ++t) c.tensors.push_back(pattern(tensor_bytes(), seed(handle, t)));
  return c;
}

void Model::copy_rows(int src, int s, int dst, int d, int st, int count, int dt) {
  for (int i = 0; i < count; ++i) {
    const Bytes& from =
        caches[static_cast<std::size_t>(src)].tensors[static_cast<std::size_t>(st + i)];
    Bytes& to = caches[static_cast<std::size_t>(dst)].tensors[static_cast<std::size_t>(dt + i)];
    std::copy_n(from.begin() + s * width, width, to.begin() + d * width);
  }
}

void showValue(const Model& m, std::ostream& os) {
  os << "caches of " << m.tensors() << " tensors, shape [" << m.rows << ", " << m.width
     << "] INT8; init options ";
  engine_rules::showValue(m.init, os);
  os << " ("
     << (m.v1     ? "v1"
         : m.hixl ? "v2 hixl"
                  : "v2")
     << (m.remote ? ", remote accessible" : "") << ")"
     << (m.switch_role_option ? ", llm.EnableSwitchRole" : "") << (m.strict ? ", strict" : "")
     << (m.staging ? ", 128 MiB device pool" : "");
}

int next_covered(const ModelTask& t, int from, int layers) {
  for (int layer = from; layer < layers; ++layer) {
    for (const ModelConfig& c : t.configs) {
      if (c.start <= layer && layer < c.stop) return layer;
    }
  }
  return -1;
}

}  // namespace kvsim::properties::api_model
