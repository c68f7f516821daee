// kvsim's source-compatible declaration of CANN metadef's external/ge_common/ge_error_codes.h,
// which only forwards to graph/error_codes.h. Header-only: nothing to implement.
#pragma once

#include "graph/error_codes.h"
