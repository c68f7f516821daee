/* kvsim's source-compatible declaration of the CANN runtime's acl/acl.h, reduced to the runtime
 * part transfer programs use (acl_rt.h; the operator and model APIs are left out). The functions
 * are implemented in cpp/src/ against kvsim's simulated devices. */
#pragma once

#include "acl_rt.h"
