// kvsim's source-compatible declaration of CANN metadef's graph/types.h, reduced to what
// llm_datadist programs use: ge::DataType, the char/float aliases and GetSizeByDataType.
// Header-only: nothing to implement.
#pragma once

// The real header brings these in; programs may lean on them transitively.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "graph/c_types.h"

namespace ge {

using char_t = char;
using float32_t = float;
using float64_t = double;

/// Added to a bit count in GetSizeByDataType's answer for types narrower than a byte.
static constexpr int32_t kDataTypeSizeBitOffset = 1000;

/// Tensor element type. Unscoped, with no fixed underlying type, as in metadef; the numbers are
/// C_DataType's (5 is unused).
enum DataType {
  DT_FLOAT = C_DT_FLOAT,
  DT_FLOAT16 = C_DT_FLOAT16,
  DT_INT8 = C_DT_INT8,
  DT_INT32 = C_DT_INT32,
  DT_UINT8 = C_DT_UINT8,
  DT_INT16 = C_DT_INT16,
  DT_UINT16 = C_DT_UINT16,
  DT_UINT32 = C_DT_UINT32,
  DT_INT64 = C_DT_INT64,
  DT_UINT64 = C_DT_UINT64,
  DT_DOUBLE = C_DT_DOUBLE,
  DT_BOOL = C_DT_BOOL,
  DT_STRING = C_DT_STRING,
  DT_DUAL_SUB_INT8 = C_DT_DUAL_SUB_INT8,
  DT_DUAL_SUB_UINT8 = C_DT_DUAL_SUB_UINT8,
  DT_COMPLEX64 = C_DT_COMPLEX64,
  DT_COMPLEX128 = C_DT_COMPLEX128,
  DT_QINT8 = C_DT_QINT8,
  DT_QINT16 = C_DT_QINT16,
  DT_QINT32 = C_DT_QINT32,
  DT_QUINT8 = C_DT_QUINT8,
  DT_QUINT16 = C_DT_QUINT16,
  DT_RESOURCE = C_DT_RESOURCE,
  DT_STRING_REF = C_DT_STRING_REF,
  DT_DUAL = C_DT_DUAL,
  DT_VARIANT = C_DT_VARIANT,
  DT_BF16 = C_DT_BF16,
  DT_UNDEFINED = C_DT_UNDEFINED,
  DT_INT4 = C_DT_INT4,
  DT_UINT1 = C_DT_UINT1,
  DT_INT2 = C_DT_INT2,
  DT_UINT2 = C_DT_UINT2,
  DT_COMPLEX32 = C_DT_COMPLEX32,
  DT_HIFLOAT8 = C_DT_HIFLOAT8,
  DT_FLOAT8_E5M2 = C_DT_FLOAT8_E5M2,
  DT_FLOAT8_E4M3FN = C_DT_FLOAT8_E4M3FN,
  DT_FLOAT8_E8M0 = C_DT_FLOAT8_E8M0,
  DT_FLOAT6_E3M2 = C_DT_FLOAT6_E3M2,
  DT_FLOAT6_E2M3 = C_DT_FLOAT6_E2M3,
  DT_FLOAT4_E2M1 = C_DT_FLOAT4_E2M1,
  DT_FLOAT4_E1M2 = C_DT_FLOAT4_E1M2,
  DT_HIFLOAT4 = C_DT_HIFLOAT4,
  DT_MAX = C_DT_MAX,
};

/// Bytes per element of `data_type`; kDataTypeSizeBitOffset + bits for sub-byte types; -1 for
/// types without a fixed size (strings, DT_UNDEFINED, the unused 5) and for values out of range.
inline int GetSizeByDataType(DataType data_type) {
  constexpr int kSub = kDataTypeSizeBitOffset;
  switch (data_type) {
    case DT_INT8:
    case DT_UINT8:
    case DT_BOOL:
    case DT_DUAL_SUB_INT8:
    case DT_DUAL_SUB_UINT8:
    case DT_QINT8:
    case DT_QUINT8:
    case DT_HIFLOAT8:
    case DT_FLOAT8_E5M2:
    case DT_FLOAT8_E4M3FN:
    case DT_FLOAT8_E8M0:
      return 1;
    case DT_FLOAT16:
    case DT_INT16:
    case DT_UINT16:
    case DT_QINT16:
    case DT_QUINT16:
    case DT_BF16:
      return 2;
    case DT_FLOAT:
    case DT_INT32:
    case DT_UINT32:
    case DT_QINT32:
    case DT_COMPLEX32:
      return 4;
    case DT_DUAL:
      return 5;
    case DT_INT64:
    case DT_UINT64:
    case DT_DOUBLE:
    case DT_COMPLEX64:
    case DT_RESOURCE:
    case DT_VARIANT:
      return 8;
    case DT_COMPLEX128:
      return 16;
    case DT_UINT1:
      return kSub + 1;
    case DT_INT2:
    case DT_UINT2:
      return kSub + 2;
    case DT_INT4:
    case DT_FLOAT4_E2M1:
    case DT_FLOAT4_E1M2:
    case DT_HIFLOAT4:
      return kSub + 4;
    case DT_FLOAT6_E3M2:
    case DT_FLOAT6_E2M3:
      return kSub + 6;
    default:  // DT_STRING, DT_STRING_REF, DT_UNDEFINED, DT_MAX and anything not listed
      return -1;
  }
}

}  // namespace ge
