// kvsim's source-compatible declaration of CANN metadef's graph/c_types.h, reduced to the C data
// type enum that ge::DataType takes its values from. Header-only: nothing to implement.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/// Tensor element types for C callers; ge::DataType has the same numbers (value 5 is unused).
typedef enum {
  C_DT_FLOAT = 0,
  C_DT_FLOAT16 = 1,
  C_DT_INT8 = 2,
  C_DT_INT32 = 3,
  C_DT_UINT8 = 4,
  C_DT_INT16 = 6,
  C_DT_UINT16 = 7,
  C_DT_UINT32 = 8,
  C_DT_INT64 = 9,
  C_DT_UINT64 = 10,
  C_DT_DOUBLE = 11,
  C_DT_BOOL = 12,
  C_DT_STRING = 13,
  C_DT_DUAL_SUB_INT8 = 14,
  C_DT_DUAL_SUB_UINT8 = 15,
  C_DT_COMPLEX64 = 16,
  C_DT_COMPLEX128 = 17,
  C_DT_QINT8 = 18,
  C_DT_QINT16 = 19,
  C_DT_QINT32 = 20,
  C_DT_QUINT8 = 21,
  C_DT_QUINT16 = 22,
  C_DT_RESOURCE = 23,
  C_DT_STRING_REF = 24,
  C_DT_DUAL = 25,
  C_DT_VARIANT = 26,
  C_DT_BF16 = 27,
  C_DT_UNDEFINED = 28,
  C_DT_INT4 = 29,
  C_DT_UINT1 = 30,
  C_DT_INT2 = 31,
  C_DT_UINT2 = 32,
  C_DT_COMPLEX32 = 33,
  C_DT_HIFLOAT8 = 34,
  C_DT_FLOAT8_E5M2 = 35,
  C_DT_FLOAT8_E4M3FN = 36,
  C_DT_FLOAT8_E8M0 = 37,
  C_DT_FLOAT6_E3M2 = 38,
  C_DT_FLOAT6_E2M3 = 39,
  C_DT_FLOAT4_E2M1 = 40,
  C_DT_FLOAT4_E1M2 = 41,
  C_DT_HIFLOAT4 = 42,
  C_DT_MAX  ///< One past the last type (43).
} C_DataType;

#ifdef __cplusplus
}
#endif
