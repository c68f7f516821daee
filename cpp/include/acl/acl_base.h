/* kvsim's source-compatible declaration of the CANN runtime's acl/acl_base.h: the base types
 * and the common and runtime error codes (the model and graph-engine parts are left out).
 * Header-only: nothing to implement. */
#pragma once

#include "acl/acl_base_rt.h"
#include "error_codes/rt_error_codes.h"
