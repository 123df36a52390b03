// The part of TensorFlow's stable C API (c_api.h, kernels.h, ops.h,
// tf_tensor.h, tf_status.h) that the op library calls, declared here so it
// builds without TensorFlow installed. The symbols are left undefined and
// resolve against libtensorflow_framework when tf.load_op_library loads the
// library into a TensorFlow process; only C functions of the stable API are
// used, never TensorFlow's C++ ABI, so one build serves many releases.
#ifndef HOROVOD_TENSORFLOW_TF_C_API_H_
#define HOROVOD_TENSORFLOW_TF_C_API_H_

#include <stddef.h>
#include <stdint.h>

extern "C" {

typedef struct TF_Status TF_Status;
typedef struct TF_Tensor TF_Tensor;
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_KernelBuilder TF_KernelBuilder;
typedef struct TF_OpKernelConstruction TF_OpKernelConstruction;
typedef struct TF_OpKernelContext TF_OpKernelContext;

// Values of TF_Code and TF_DataType used here (their numbering is part of
// the stable API and of TensorFlow's protocol buffers).
enum TfCode {
  kTfOk = 0,
  kTfInvalidArgument = 3,
  kTfDeadlineExceeded = 4,
  kTfResourceExhausted = 8,
  kTfFailedPrecondition = 9,
  kTfAborted = 10,
  kTfInternal = 13,
};
enum TfDataType {
  kTfFloat = 1,
  kTfDouble = 2,
  kTfInt32 = 3,
  kTfUInt8 = 4,
  kTfInt16 = 5,
  kTfInt8 = 6,
  kTfInt64 = 9,
  kTfBool = 10,
  kTfBFloat16 = 14,
  kTfHalf = 19,
};

TF_Status* TF_NewStatus();
void TF_DeleteStatus(TF_Status* s);
void TF_SetStatus(TF_Status* s, int code, const char* msg);
int TF_GetCode(const TF_Status* s);
const char* TF_Message(const TF_Status* s);

TF_OpDefinitionBuilder* TF_NewOpDefinitionBuilder(const char* op_name);
void TF_OpDefinitionBuilderAddInput(TF_OpDefinitionBuilder* b,
                                    const char* spec);
void TF_OpDefinitionBuilderAddOutput(TF_OpDefinitionBuilder* b,
                                     const char* spec);
void TF_OpDefinitionBuilderAddAttr(TF_OpDefinitionBuilder* b, const char* spec);
void TF_OpDefinitionBuilderSetIsStateful(TF_OpDefinitionBuilder* b,
                                         bool is_stateful);
// Takes ownership of the builder.
void TF_RegisterOpDefinition(TF_OpDefinitionBuilder* b, TF_Status* status);

TF_KernelBuilder* TF_NewKernelBuilder(
    const char* op_name, const char* device_name,
    void* (*create_func)(TF_OpKernelConstruction*),
    void (*compute_func)(void*, TF_OpKernelContext*),
    void (*delete_func)(void*));
// Takes ownership of the builder.
void TF_RegisterKernelBuilder(const char* kernel_name, TF_KernelBuilder* b,
                              TF_Status* status);

void TF_OpKernelConstruction_GetAttrSize(TF_OpKernelConstruction* ctx,
                                         const char* attr_name,
                                         int32_t* list_size,
                                         int32_t* total_size,
                                         TF_Status* status);
void TF_OpKernelConstruction_GetAttrInt64(TF_OpKernelConstruction* ctx,
                                          const char* attr_name, int64_t* val,
                                          TF_Status* status);
void TF_OpKernelConstruction_GetAttrInt64List(TF_OpKernelConstruction* ctx,
                                              const char* attr_name,
                                              int64_t* vals, int max_vals,
                                              TF_Status* status);
void TF_OpKernelConstruction_GetAttrFloat(TF_OpKernelConstruction* ctx,
                                          const char* attr_name, float* val,
                                          TF_Status* status);
void TF_OpKernelConstruction_GetAttrStringList(TF_OpKernelConstruction* ctx,
                                               const char* attr_name,
                                               char** values, size_t* lengths,
                                               int max_values, void* storage,
                                               size_t storage_size,
                                               TF_Status* status);
void TF_OpKernelConstruction_Failure(TF_OpKernelConstruction* ctx,
                                     TF_Status* status);

int TF_NumInputs(TF_OpKernelContext* ctx);
// On success the caller owns *tensor.
void TF_GetInput(TF_OpKernelContext* ctx, int i, TF_Tensor** tensor,
                 TF_Status* status);
TF_Tensor* TF_ForwardInputOrAllocateOutput(
    TF_OpKernelContext* ctx, const int* candidate_input_indices,
    int num_candidate_input_indices, int output_index,
    const int64_t* output_dims, int output_num_dims, int* forwarded_input,
    TF_Status* status);
TF_Tensor* TF_AllocateOutput(TF_OpKernelContext* ctx, int index, int dtype,
                             const int64_t* dims, int num_dims, size_t len,
                             TF_Status* status);
void TF_SetOutput(TF_OpKernelContext* ctx, int i, const TF_Tensor* tensor,
                  TF_Status* status);
void TF_OpKernelContext_Failure(TF_OpKernelContext* ctx, TF_Status* status);

TF_Tensor* TF_NewTensor(int dtype, const int64_t* dims, int num_dims,
                        void* data, size_t len,
                        void (*deallocator)(void* data, size_t len, void* arg),
                        void* deallocator_arg);
void TF_DeleteTensor(TF_Tensor* t);
int TF_TensorType(const TF_Tensor* t);
int TF_NumDims(const TF_Tensor* t);
int64_t TF_Dim(const TF_Tensor* t, int dim_index);
size_t TF_TensorByteSize(const TF_Tensor* t);
void* TF_TensorData(const TF_Tensor* t);

}  // extern "C"

#endif  // HOROVOD_TENSORFLOW_TF_C_API_H_
