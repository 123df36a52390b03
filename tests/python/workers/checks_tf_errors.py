"""horovod.tensorflow: bad input and ranks that disagree raise clear errors
on every rank involved, eagerly and in graphs, and the job goes on (run by
checks.py at np=2, one pytest case per check)."""

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from expect import raises

hvd.init()
r, n = hvd.rank(), hvd.size()


def still_working():
    y = hvd.allreduce(tf.constant([float(r)]), op=hvd.Sum)
    assert np.allclose(y.numpy(), [sum(range(n))]), y


def check_mismatched_shapes_fail_on_every_rank_eagerly():
    raises(hvd.HorovodInternalError,
           lambda: hvd.allreduce(tf.ones([r + 1]), name="shape"),
           "Mismatched allreduce tensor shapes", "rank 0", "rank 1")
    still_working()


def check_mismatched_dtypes_fail_in_a_function():
    f = tf.function(lambda x: hvd.allreduce(x, name="dtype"))
    x = tf.ones([2], tf.float32 if r == 0 else tf.float64)
    raises(tf.errors.OpError, lambda: f(x), "Mismatched", "dtype")
    still_working()


def check_mismatched_ops_fail():
    def op():
        if r == 0:
            return hvd.allreduce(tf.ones([2]), name="which")
        return hvd.allgather(tf.ones([2]), name="which")
    raises(hvd.HorovodInternalError, op, "which")
    still_working()


def check_a_gradient_none_on_some_ranks_fails_them_all_or_is_zeroed():
    # b reaches the loss on rank 0 only: its gradient is None elsewhere and
    # is not reduced there (as upstream), so rank 0 waits for a reduction
    # the others never start. Both fail within the deadlock check's grace
    # (the others in the collective they go on to), and the job goes on.
    # unconnected_gradients=ZERO reduces a zero gradient in its place.
    import time
    a, b = tf.Variable([1.0, 2.0]), tf.Variable([3.0])

    def grads(**kwargs):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(a * a)
            if r == 0:
                loss += tf.reduce_sum(b * b)
        tape = hvd.DistributedGradientTape(tape)
        return tape.gradient(loss, [a, b], **kwargs)

    def rank0_tape_others_next_collective():
        got = grads()
        assert got[1] is None and r != 0, got
        hvd.allreduce(tf.ones([1]), name="after_the_tape")
    start = time.time()
    raises(hvd.HorovodInternalError, rank0_tape_others_next_collective,
           "can never match", "allreduce.DistributedGradientTape.1.")
    assert time.time() - start < 2.5, time.time() - start
    still_working()
    got = grads(unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert np.allclose(got[0].numpy(), [2.0, 4.0]), got
    assert np.allclose(got[1].numpy(), [6.0 / n]), got


def check_ranks_apart_in_functions_fail_fast_after_the_main_threads_calls():
    # The main thread's own calls (broadcast_object, allgather_object, a
    # process set added and removed) do not leave it counted as a thread
    # that computes: blocked later in a tf.function whose collectives run on
    # TensorFlow's threads, the rank is still found stuck by the deadlock
    # check (not by the stall check, minutes later).
    import time
    assert hvd.broadcast_object(r + 5, 0) == 5
    assert hvd.allgather_object(r) == list(range(n))
    hvd.remove_process_set(hvd.add_process_set(list(range(n))))
    apart = tf.function(lambda x: hvd.allreduce(x, name="apart.%d" % r))
    start = time.time()
    raises(tf.errors.OpError, lambda: apart(tf.ones([2])), "can never match",
           "apart.0", "apart.1")
    assert time.time() - start < 2.5, time.time() - start
    still_working()


def check_bad_input_names_value_and_rank():
    raises(hvd.HorovodInvalidArgumentError,
           lambda: hvd.allreduce(tf.constant(["a"])), "string",
           "rank %d" % r)
    raises(ValueError, lambda: hvd.allreduce(tf.ones([2], tf.complex64)),
           "complex64", "rank %d" % r)
    raises(ValueError, lambda: hvd.alltoall(tf.ones([2]), splits=[0.5, 1.5]),
           "integers", "rank %d" % r)
    raises(ValueError, lambda: hvd.alltoall(tf.ones([4]), splits=[1, 1]),
           "rank %d" % r)
    for op in (hvd.allreduce, hvd.allgather):  # no dense form to send
        raises(TypeError, lambda: op(tf.ragged.constant([[1.0], [2.0, 3.0]])),
               "a RaggedTensor cannot be converted to a tensor (rank %d)" % r)
    raises(ValueError, lambda: hvd.reducescatter(tf.constant(1.0)),
           "reducescatter needs a tensor of at least one dimension",
           "rank %d" % r)
    raises(ValueError, lambda: hvd.broadcast(tf.ones([2]), root_rank=n + 3),
           "root", str(n + 3))
    raises(ValueError, lambda: hvd.allreduce(tf.ones([2]),
                                             process_set=hvd.ProcessSet([0])),
           "not registered")
    raises(ValueError, lambda: hvd.broadcast_([tf.ones([2])], 0), "variables",
           "rank %d" % r)
    # An unknown reduce op, eagerly and in a function, before any peer
    # sees it.
    raises(hvd.HorovodInvalidArgumentError,
           lambda: hvd.allreduce(tf.ones([2]), op=99, name="badop"),
           "unknown reduce op 99", "rank %d" % r)
    raises(tf.errors.InvalidArgumentError,
           tf.function(lambda: hvd.allreduce(tf.ones([2]), op=99,
                                             name="badop.f")),
           "unknown reduce op 99", "rank %d" % r)
    # Ints past int's range are refused as given, eagerly and in a
    # function, not narrowed onto a root or an op that exists (2^32 + 1
    # would wrap onto 1).
    for bad in (2**32, 2**32 + 1, -2**32):
        raises(hvd.HorovodInvalidArgumentError,
               lambda: hvd.broadcast(tf.ones([2]), root_rank=bad),
               "root rank %d is out of range" % bad, "rank %d" % r)
    raises(hvd.HorovodInvalidArgumentError,
           lambda: hvd.allreduce(tf.ones([2]), op=2**32 + 1),
           "reduce op %d is out of range" % (2**32 + 1), "rank %d" % r)
    # In a function, while it is traced.
    raises(hvd.HorovodInvalidArgumentError,
           tf.function(lambda: hvd.broadcast(tf.ones([2]),
                                             root_rank=2**32 + 1)),
           "root rank %d is out of range" % (2**32 + 1), "rank %d" % r)
    # Numbers of the wrong kind, not truncated (int() takes 1.5 as 1).
    for call in (lambda: hvd.broadcast(tf.ones([2]), 1.5),
                 tf.function(lambda: hvd.broadcast(tf.ones([2]), 1.5))):
        raises(TypeError, call,
               "root rank must be an integer, got 1.5 (rank %d)" % r)
    for call in (lambda: hvd.allreduce(tf.ones([2]), op=1.0),
                 tf.function(lambda: hvd.allreduce(tf.ones([2]), op=1.0))):
        raises(TypeError, call,
               "reduce op must be an integer, got 1.0 (rank %d)" % r)
    raises(TypeError, lambda: hvd.allreduce(tf.ones([2]),
                                            prescale_factor="2"),
           "prescale factor must be a number, got '2' (rank %d)" % r)
    # NumPy's integers and 0-dim integer tensors are integers.
    y = hvd.broadcast(tf.fill([2], float(r)), np.int64(n - 1))
    assert np.allclose(y.numpy(), [n - 1] * 2), y
    still_working()


def check_input_one_rank_refuses_fails_the_peers_eagerly():
    # Rank 0 refuses its input before TensorFlow's op runs; the others fail
    # with its reason instead of waiting for it, and the job goes on. Each
    # case is (call on rank 0, call on the others, what both errors say).
    x = tf.ones([2 * n])
    ragged = tf.ragged.constant([[1.0], [2.0, 3.0]])
    complex64 = tf.ones([2 * n], tf.complex64)
    cases = (
        (lambda: hvd.allreduce(complex64), lambda: hvd.allreduce(x),
         "unsupported tensor dtype complex64"),
        (lambda: hvd.allreduce(complex64, name="steady"),
         lambda: hvd.allreduce(x, name="steady"), "complex64"),
        (lambda: hvd.grouped_allreduce([x, ragged]),
         lambda: hvd.grouped_allreduce([x, x]), "RaggedTensor"),
        (lambda: hvd.allgather(ragged), lambda: hvd.allgather(x),
         "RaggedTensor"),
        (lambda: hvd.broadcast(x, 1.5), lambda: hvd.broadcast(x, 0),
         "root rank must be an integer, got 1.5"),
        (lambda: hvd.allreduce(x, op=1.0), lambda: hvd.allreduce(x),
         "reduce op must be an integer, got 1.0"),
        (lambda: hvd.alltoall(x, splits=[0.5] * n), lambda: hvd.alltoall(x),
         "alltoall splits must be integers"),
        (lambda: hvd.alltoall(complex64, name="a2a"),
         lambda: hvd.alltoall(x, name="a2a"), "complex64"),
        (lambda: hvd.reducescatter(ragged), lambda: hvd.reducescatter(x),
         "RaggedTensor"),
        (lambda: hvd.grouped_reducescatter([complex64]),
         lambda: hvd.grouped_reducescatter([x]), "complex64"),
        (lambda: hvd.broadcast_([x], 0, name="vars"),
         lambda: hvd.broadcast_([tf.Variable(x)], 0, name="vars"),
         "works in place on variables"))
    for mine, theirs, said in cases:
        if r == 0:
            raises(Exception, mine, said, "rank 0")
        else:
            raises(hvd.HorovodInternalError, theirs, "was refused by rank 0: ",
                   said)
        still_working()
    # While a tape records, through the differentiable path.
    with tf.GradientTape():
        if r == 0:
            raises(Exception, lambda: hvd.allgather(complex64), "complex64")
        else:
            raises(hvd.HorovodInternalError, lambda: hvd.allgather(x),
                   "was refused by rank 0: ", "complex64")
    still_working()


def check_eager_op_refuses_plans_it_does_not_have():
    # Eager calls name a plan registered with the op library by number; a
    # number it never gave out, or inputs that do not fit the plan, fail
    # that call alone.
    from horovod.tensorflow import op_library as lib
    x = tf.ones([2])
    raises(tf.errors.InvalidArgumentError,
           lambda: lib._run_eager([x], tf.constant([1 << 40], tf.int64)),
           "unknown plan")
    plan = lib._eager_plan(lib.allreduce_units("plan"), 0, hvd.Sum, 1.0,
                           1.0, 0)
    raises(tf.errors.InvalidArgumentError,
           lambda: lib._run_eager([x, x], plan), "do not match the plan")
    raises(tf.errors.InvalidArgumentError,
           lambda: lib._run_eager([x], plan[:1]), "do not match the plan")
    assert np.allclose(lib._run_eager([x], plan)[0].numpy(), [n, n])
    # Once the library holds no more plans, new arguments carry their
    # attributes instead, with the same results and errors.
    lib._plans_full = True
    try:
        y = hvd.allreduce(tf.constant([float(r)]), op=hvd.Sum,
                          name="after.full")
        assert np.allclose(y.numpy(), [sum(range(n))]), y
        raises(hvd.HorovodInternalError,
               lambda: hvd.allreduce(tf.ones([r + 1]), name="shape.full"),
               "Mismatched allreduce tensor shapes", "rank 0", "rank 1")
    finally:
        lib._plans_full = False
    still_working()


def check_xla_is_refused_clearly():
    f = tf.function(lambda x: hvd.allreduce(x), jit_compile=True)
    raises(NotImplementedError, lambda: f(tf.ones([2])), "XLA",
           "jit_compile", "rank %d" % r)
    still_working()


def check_distributed_optimizer_refuses_what_it_cannot_do():
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1),
        backward_passes_per_step=0), "backward_passes_per_step")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), op=hvd.Sum,
        gradient_predivide_factor=2.0), "gradient_predivide_factor")
    with tf.GradientTape() as tape:
        pass
    raises(ValueError, lambda: hvd.DistributedGradientTape(
        tape, gradient_predivide_factor=0.0),
        "gradient_predivide_factor must not be 0")
    raises(ValueError, lambda: hvd.DistributedOptimizer(object()),
           "object")
    for wrap in (lambda c: hvd.DistributedGradientTape(tape, compression=c),
                 lambda c: hvd.DistributedOptimizer(
                     tf.compat.v1.train.GradientDescentOptimizer(0.1),
                     compression=c),
                 lambda c: hvd.allreduce(tf.ones(2), compression=c)):
        raises(ValueError, lambda: wrap("fp16"), "compression must be a "
               "compressor such as Compression.none or Compression.fp16 "
               "(with compress and decompress), got 'fp16'")
    raises(ValueError, lambda: hvd.DistributedGradientTape("tape"),
           "DistributedGradientTape wraps a tf.GradientTape, got str")
    raises(ValueError, lambda: hvd.PartialDistributedGradientTape(
        tape, local_layers=[tf.Variable(1.0)]), "local_layers takes a Keras "
        "layer or a list of them, got ResourceVariable")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), op=17),
        "unknown reduce op 17; the ops are Average (0)")
    raises(ValueError, lambda: hvd.DistributedOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1),
        backward_passes_per_step=1.5),
        "backward_passes_per_step must be an integer of at least 1, got 1.5")
    still_working()


def check_shutdown_and_init_again():
    # The op library lets go of the engine at shutdown and binds the next.
    f = tf.function(lambda x: hvd.allreduce(x, op=hvd.Sum, name="again"))
    x = tf.constant([1.0])
    hvd.shutdown()
    raises(ValueError, lambda: hvd.allreduce(x), "has not been initialized")
    raises(tf.errors.OpError, lambda: f(x), "has not been initialized")
    hvd.init()
    assert np.allclose(f(x).numpy(), [n]), f(x)
    still_working()
