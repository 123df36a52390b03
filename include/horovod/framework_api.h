/* The engine as a table of C functions, for framework kernels that live in
 * libraries of their own (TensorFlow's op library, JAX's FFI handlers).
 * Those libraries are loaded by the framework, not linked with the engine,
 * so they reach it only through this table: horovod._core hands out its
 * address with an engine pointer, and the library keeps both until the
 * engine shuts down. Plain C types only, so the two sides need agree on
 * nothing but this header.
 *
 * Values: dtype is horovod::DataType, op_type horovod::OpType, reduce_op
 * horovod::ReduceOp, a status code horovod::StatusCode (0 is success).
 *
 * Ownership: start() returns an HvdOp the caller owns, waits for, then gives
 * back with release(); the tensors' memory must stay valid until wait()
 * returns. An output's owner keeps its bytes alive, independently of the
 * op, until release_output().
 *
 * Thread-safety: every function may be called from any thread; one HvdOp is
 * used by one thread at a time. */
#ifndef HOROVOD_FRAMEWORK_API_H_
#define HOROVOD_FRAMEWORK_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVD_FRAMEWORK_API_VERSION 2

typedef struct HvdOp HvdOp;

/* A dense, C-contiguous tensor in host memory, not owned. */
typedef struct {
  void* data;
  int dtype;
  int ndim;
  const int64_t* shape;
  /* Allreduce: the operand, when it is not `data` (out of place; see
   * horovod::TensorView::input). NULL: in place. */
  const void* input;
} HvdTensor;

typedef struct {
  int op_type;
  const char* name; /* negotiated name, unique among in-flight operations */
  int reduce_op;
  double prescale;
  double postscale;
  int root;              /* broadcast root, a global rank */
  const int64_t* splits; /* alltoall: rows sent to each member; may be NULL */
  int num_splits;
  int process_set;
} HvdOpArgs;

/* A finished operation's engine-allocated result. */
typedef struct {
  void* data;
  size_t bytes;
  int ndim;
  const int64_t* shape; /* valid until the op is released */
  void* owner;          /* give to release_output() when done with data */
} HvdOutput;

typedef struct {
  uint32_t version;
  /* Starts one operation over `count` tensors (a group when several;
   * allreduce and broadcast work in place). Never NULL: an operation that
   * could not start carries its error, reported by wait(). */
  HvdOp* (*start)(void* engine, const HvdOpArgs* args, const HvdTensor* tensors,
                  int count);
  /* Blocks until the operation finished; its status code. */
  int (*wait)(HvdOp* op);
  /* The error of a failed operation ("" on success). */
  const char* (*message)(const HvdOp* op);
  /* True when the failure happened before anything was enqueued (bad local
   * input), so no other rank took part. */
  int (*rejected)(const HvdOp* op);
  /* Output `index` of a finished allgather, alltoall or reducescatter. */
  int (*output)(HvdOp* op, int index, HvdOutput* out);
  void (*release_output)(void* owner);
  /* A buffer of `bytes` for a result the caller hands to its framework
   * (see horovod::Engine::ResultBuffer): `out` gets its data, size and
   * owner (ndim 0, shape NULL). Nonzero when there is no memory for it. */
  int (*result_buffer)(void* engine, size_t bytes, HvdOutput* out);
  /* Alltoall: how many rows came from each member; returns the count. */
  int (*received_splits)(const HvdOp* op, const int64_t** splits);
  void (*release)(HvdOp* op);
  /* See horovod::Engine::LeaveCensus. */
  void (*leave_census)(void* engine);
  int (*rank)(void* engine);
} HvdFrameworkApi;

#ifdef __cplusplus
}

namespace horovod {
/* The table over horovod::Engine (in the engine library): immutable, and
 * valid for the life of the process. Kernel libraries never call this;
 * they receive the table's address. */
const HvdFrameworkApi* FrameworkApi();
}  // namespace horovod
#endif

#endif /* HOROVOD_FRAMEWORK_API_H_ */
