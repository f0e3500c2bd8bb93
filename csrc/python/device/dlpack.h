/*
 * dlpack.h - the DLPack tensor exchange ABI, version 1.1, transcribed for usbeam from the
 * DLPack specification (https://dmlc.github.io/dlpack/latest/, "C API").
 *
 * Only what usbeam needs is here: the structs (layout and field order exactly as the spec,
 * since they cross library boundaries by pointer), the enumerators usbeam reads or writes,
 * and the flag bits.  The Python protocol around them (capsule names "dltensor" /
 * "dltensor_versioned", renaming to "used_..." on consumption, __dlpack__ and
 * __dlpack_device__) is in the Python array API standard and implemented in py_dlpack.c.
 *
 * Conventions of the spec that matter to the code:
 * - shape and strides are in elements (not bytes); strides == NULL means compact C order;
 * - the first element is at (char *)data + byte_offset;
 * - a consumer must check version.major: a different major version may change the ABI
 *   after the `flags` field;
 * - deleter(self) releases everything, including the managed struct itself; it may be NULL.
 */
#ifndef USBEAM_DLPACK_H
#define USBEAM_DLPACK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define USBEAM_DLPACK_MAJOR_VERSION 1
#define USBEAM_DLPACK_MINOR_VERSION 1

typedef struct {
    uint32_t major; /* a change means an ABI break */
    uint32_t minor; /* backward-compatible additions */
} DLPackVersion;

/* Device types (values fixed by the spec; usbeam produces and accepts kDLCPU and kDLCUDA). */
typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3, /* pinned host memory (cudaMallocHost) */
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id; /* e.g. the CUDA ordinal; 0 for the CPU */
} DLDevice;

/* Type codes of DLDataType.code. */
typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5, /* bits counts both parts: complex64 is {kDLComplex, 64, 1} */
    kDLBool = 6
    /* 1.1 adds the float8 / float6 / float4 codes 7..17; usbeam accepts none of them */
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;   /* bits per lane */
    uint16_t lanes; /* 1 for scalar element types */
} DLDataType;

typedef struct {
    void *data;           /* allocation base (the spec recommends 256-byte alignment); the first
                             element is at data + byte_offset */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;       /* [ndim] */
    int64_t *strides;     /* [ndim] in elements, or NULL for compact C order */
    uint64_t byte_offset;
} DLTensor;

/* Legacy (pre-1.0) managed tensor, exchanged in a capsule named "dltensor". */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* Flag bits of DLManagedTensorVersioned.flags. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

/* Versioned managed tensor (1.0 and later), exchanged in a capsule named
 * "dltensor_versioned".  Everything up to and including `flags` stays stable across major
 * versions so that a consumer can always call the deleter. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_DLPACK_H */
