// kvsim's source-compatible declaration of CANN llm_datadist's llm_datadist/llm_engine_types.h:
// the older LLM engine's role names and option keys (namespace llm). Header-only: nothing to
// implement. LlmDataDist programs use the OPTION_* keys of llm_datadist.h instead.
#pragma once

namespace llm {

/// Role names, as the values of LLM_OPTION_ROLE.
constexpr const char kPrompt[] = "Prompt";
constexpr const char kDecoder[] = "Decoder";

/// Option keys.
constexpr const char LLM_OPTION_CLUSTER_INFO[] = "llm.ClusterInfo";
constexpr const char LLM_OPTION_ROLE[] = "llm.Role";
constexpr const char LLM_OPTION_SYNC_KV_CACHE_WAIT_TIME[] = "llm.SyncKvCacheWaitTime";
constexpr const char LLM_OPTION_OUTPUT_MAX_SIZE[] = "llm.OutputMaxSize";
constexpr const char LLM_OPTION_ENABLE_SWITCH_ROLE[] = "llm.EnableSwitchRole";
constexpr const char LLM_OPTION_BUF_POOL_CFG[] = "llm.BufPoolCfg";

}  // namespace llm
