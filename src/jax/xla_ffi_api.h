// The part of XLA's FFI C API (xla/ffi/api/c_api.h, shipped with jaxlib)
// that Horovod's XLA handler uses, declared here so the project builds
// without JAX. These are C structs passed across the boundary by XLA at
// run time; their layouts are part of XLA's versioned C ABI (major version
// 0), and every struct starts with its size, so fields are only appended.
#ifndef HOROVOD_JAX_XLA_FFI_API_H_
#define HOROVOD_JAX_XLA_FFI_API_H_

#include <stddef.h>
#include <stdint.h>

extern "C" {

struct XLA_FFI_Api;
struct XLA_FFI_Error;
struct XLA_FFI_ExecutionContext;
struct XLA_FFI_Future;

enum XLA_FFI_Extension_Type { XLA_FFI_Extension_Metadata = 1 };

struct XLA_FFI_Extension_Base {
  size_t struct_size;
  XLA_FFI_Extension_Type type;
  XLA_FFI_Extension_Base* next;
};

struct XLA_FFI_Api_Version {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int major_version;
  int minor_version;
};

// The subset of error codes used here (gRPC's numbering).
enum XLA_FFI_Error_Code {
  XLA_FFI_Error_Code_INVALID_ARGUMENT = 3,
  XLA_FFI_Error_Code_DEADLINE_EXCEEDED = 4,
  XLA_FFI_Error_Code_FAILED_PRECONDITION = 9,
  XLA_FFI_Error_Code_ABORTED = 10,
  XLA_FFI_Error_Code_INTERNAL = 13,
};

struct XLA_FFI_Error_Create_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  const char* message;
  XLA_FFI_Error_Code errc;
};

// Element types used here (XLA's PrimitiveType numbering).
enum XLA_FFI_DataType {
  XLA_FFI_DataType_PRED = 1,
  XLA_FFI_DataType_S8 = 2,
  XLA_FFI_DataType_S16 = 3,
  XLA_FFI_DataType_S32 = 4,
  XLA_FFI_DataType_S64 = 5,
  XLA_FFI_DataType_U8 = 6,
  XLA_FFI_DataType_F16 = 10,
  XLA_FFI_DataType_F32 = 11,
  XLA_FFI_DataType_F64 = 12,
  XLA_FFI_DataType_BF16 = 16,
};

struct XLA_FFI_Buffer {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_DataType dtype;
  void* data;
  int64_t rank;
  int64_t* dims;
};

enum XLA_FFI_ArgType { XLA_FFI_ArgType_BUFFER = 1 };
enum XLA_FFI_RetType { XLA_FFI_RetType_BUFFER = 1 };
enum XLA_FFI_AttrType {
  XLA_FFI_AttrType_ARRAY = 1,
  XLA_FFI_AttrType_DICTIONARY = 2,
  XLA_FFI_AttrType_SCALAR = 3,
  XLA_FFI_AttrType_STRING = 4,
};

struct XLA_FFI_ByteSpan {
  const char* ptr;
  size_t len;
};

struct XLA_FFI_Scalar {
  XLA_FFI_DataType dtype;
  void* value;
};

enum XLA_FFI_ExecutionStage {
  XLA_FFI_ExecutionStage_INSTANTIATE = 0,
  XLA_FFI_ExecutionStage_PREPARE = 1,
  XLA_FFI_ExecutionStage_INITIALIZE = 2,
  XLA_FFI_ExecutionStage_EXECUTE = 3,
};

struct XLA_FFI_Args {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_ArgType* types;
  void** args;
};

struct XLA_FFI_Rets {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_RetType* types;
  void** rets;
};

struct XLA_FFI_Attrs {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_AttrType* types;
  XLA_FFI_ByteSpan** names;
  void** attrs;
};

struct XLA_FFI_CallFrame {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  const XLA_FFI_Api* api;
  XLA_FFI_ExecutionContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_Args args;
  XLA_FFI_Rets rets;
  XLA_FFI_Attrs attrs;
  XLA_FFI_Future* future;
};

typedef uint32_t XLA_FFI_Handler_Traits;

struct XLA_FFI_TypeId {
  int64_t type_id;
};

struct XLA_FFI_Metadata {
  size_t struct_size;
  XLA_FFI_Api_Version api_version;
  XLA_FFI_Handler_Traits traits;
  XLA_FFI_TypeId state_type_id;
};

struct XLA_FFI_Metadata_Extension {
  XLA_FFI_Extension_Base extension_base;
  XLA_FFI_Metadata* metadata;
};

typedef XLA_FFI_Error* XLA_FFI_Error_Create(XLA_FFI_Error_Create_Args* args);

// The table's head: only its first function is called here.
struct XLA_FFI_Api {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Api_Version api_version;
  const void* internal_api;
  XLA_FFI_Error_Create* XLA_FFI_Error_Create;
};

}  // extern "C"

#endif  // HOROVOD_JAX_XLA_FFI_API_H_
