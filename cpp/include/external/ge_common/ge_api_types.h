// kvsim's source-compatible declaration of CANN metadef's external/ge_common/ge_api_types.h,
// reduced to ge::Status: the graph-engine option keys and run callbacks of the real header are
// left out (llm_datadist programs do not use them). Header-only: nothing to implement.
#pragma once

// Standard headers the real one brings in; programs may lean on them transitively.
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph/types.h"

namespace ge {

/// Result of a ge or llm_datadist call: 0 (SUCCESS) or an error number (api_error_codes.h).
using Status = uint32_t;

}  // namespace ge
