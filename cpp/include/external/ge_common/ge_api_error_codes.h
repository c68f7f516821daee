// kvsim's source-compatible declaration of CANN metadef's external/ge_common/ge_api_error_codes.h,
// the older name of api_error_codes.h. Header-only: nothing to implement.
#pragma once

#include "api_error_codes.h"
