"""Errors, with upstream's types: cross-rank mismatches fail on every rank
and the job keeps working; bad local input is refused at once; names are
formed as upstream forms them (run by checks.py; needs np >= 2)."""

import warnings

import torch

import horovod
import horovod.torch as hvd
from common import close

hvd.init()
r, n = hvd.rank(), hvd.size()


def expect(exc_type, fragment, fn):
    try:
        fn()
    except exc_type as e:
        assert fragment in str(e), "%r lacks %r" % (str(e), fragment)
        return e
    raise AssertionError("expected %s containing %r" % (exc_type.__name__, fragment))


def works():
    close(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(n)))


def check_shape_mismatch_fails_every_rank_naming_both():
    e = expect(hvd.HorovodInternalError, "Mismatched allreduce tensor shapes",
               lambda: hvd.allreduce(torch.ones(r + 2), name="shape"))
    msg = str(e)
    assert "rank 0" in msg and "rank 1" in msg and "[2]" in msg and "[3]" in msg, msg
    assert "'allreduce.shape'" in msg, msg
    assert isinstance(e, RuntimeError)
    works()


def check_unknown_reduce_op_is_refused_on_every_rank():
    # Refused at enqueue, on every path a reduce op takes (in place by
    # name and unnamed, out of place, grouped, reducescatter), before any
    # peer sees it: the job goes on.
    for bad in (99, -1, 256):
        shown = "unknown reduce op %d" % (bad if 0 <= bad <= 255 else 255)
        for call in (
                lambda: hvd.allreduce_(torch.ones(3), name="badop", op=bad),
                lambda: hvd.allreduce_(torch.ones(3), op=bad),
                lambda: hvd.allreduce(torch.ones(3), name="badop", op=bad),
                lambda: hvd.grouped_allreduce([torch.ones(3)], op=bad),
                lambda: hvd.reducescatter(torch.ones(4), op=bad)):
            e = expect(hvd.HorovodInvalidArgumentError, shown, call)
            assert "(rank %d" % r in str(e), str(e)
    works()


def check_input_the_peers_could_not_decode_is_refused_at_once():
    # A name past the engine's messages' bound, a tensor of more dimensions
    # than they carry: refused on the rank that submits them, before a peer
    # would refuse the message and end the job.
    e = expect(hvd.HorovodInvalidArgumentError,
               "tensor name of %d bytes is longer than the 4096" % (
                   len("allreduce.") + 100000),
               lambda: hvd.allreduce(torch.ones(2), name="x" * 100000))
    assert "(rank %d" % r in str(e) and len(str(e)) < 400, str(e)[:400]
    expect(hvd.HorovodInvalidArgumentError, "tensor of 65 dimensions",
           lambda: hvd.allgather(torch.ones([1] * 65)))
    works()


def check_scalars_to_reducescatter_and_factors_not_finite_are_refused():
    expect(hvd.HorovodInvalidArgumentError,
           "reducescatter needs a tensor of at least one dimension",
           lambda: hvd.reducescatter(torch.tensor(1.0)))
    expect(hvd.HorovodInvalidArgumentError,
           "prescale_factor is nan",
           lambda: hvd.allreduce(torch.ones(2), prescale_factor=float("nan")))
    expect(hvd.HorovodInvalidArgumentError,
           "postscale_factor inf",
           lambda: hvd.allreduce(torch.ones(2), postscale_factor=float("inf")))
    works()


def check_dtype_op_root_scale_mismatches():
    dt = torch.float32 if r == 0 else torch.float64
    e = expect(hvd.HorovodInternalError, "Mismatched data types",
               lambda: hvd.allreduce(torch.ones(3, dtype=dt), name="dtype"))
    assert "float32" in str(e) and "float64" in str(e), e
    expect(hvd.HorovodInternalError, "Mismatched reduce operations",
           lambda: hvd.allreduce(torch.ones(3), name="op",
                                 op=hvd.Sum if r == 0 else hvd.Max))
    expect(hvd.HorovodInternalError, "Mismatched broadcast root",
           lambda: hvd.broadcast(torch.ones(3), 0 if r == 0 else 1, name="root"))
    expect(hvd.HorovodInternalError, "Mismatched prescale/postscale",
           lambda: hvd.allreduce(torch.ones(3), name="scale",
                                 prescale_factor=1.0 + r))
    expect(hvd.HorovodInternalError, "Mismatched allgather tensor shapes",
           lambda: hvd.allgather(torch.ones(2, r + 1), name="agshape"))
    works()


def check_grouped_members_named_k_of_n():
    e = expect(hvd.HorovodInternalError, "'grouped_allreduce.grp_2of2'",
               lambda: hvd.grouped_allreduce([torch.ones(2), torch.ones(r + 1)],
                                             name="grp"))
    assert "Mismatched allreduce tensor shapes" in str(e), e
    works()


def check_duplicate_name_refused_at_once():
    # A name stays in flight on rank 0 until the others submit it too.
    if r == 0:
        h = hvd.allreduce_async(torch.ones(2), name="dup")
        e = expect(hvd.HorovodInvalidArgumentError,
                   "Duplicate tensor name 'allreduce.dup'",
                   lambda: hvd.allreduce_async(torch.ones(2), name="dup"))
        assert "rank 0" in str(e), e
        expect(hvd.HorovodInvalidArgumentError,
               "Duplicate tensor name 'allreduce.dup'",
               lambda: hvd.allreduce_async_(torch.ones(2), name="dup"))
    go = hvd.broadcast_async(torch.ones(1), 0, name="go")
    if r == 0:
        assert go == h + 1, (h, go)  # a refused call files no handle
    hvd.synchronize(go)
    if r == 0:
        hvd.synchronize(h)
    else:
        hvd.allreduce(torch.ones(2), name="dup")


def check_scalar_where_a_tensor_is_needed():
    # Upstream reports these after negotiation as HorovodInternalError; they
    # are found here before anything is sent, and are ValueErrors too.
    for fn, what in ((hvd.allgather, "allgather"), (hvd.alltoall, "alltoall")):
        e = expect(hvd.HorovodInternalError, "at least one dimension",
                   lambda: fn(torch.tensor(1.0), name="scalar"))
        assert isinstance(e, ValueError), type(e)
        assert "rank %d" % r in str(e) and "'%s.scalar'" % what in str(e), e
    works()


def check_alltoall_splits_must_be_integers():
    expect(ValueError, "splits must be a tensor of integers",
           lambda: hvd.alltoall(torch.ones(n), splits=torch.ones(n)))
    expect(ValueError, "splits must be integers",
           lambda: hvd.alltoall(torch.ones(n), splits=[1.0] * n))
    e = expect(ValueError, "splits sum to",
               lambda: hvd.alltoall(torch.ones(5), splits=[1] * n))
    assert isinstance(e, hvd.HorovodInternalError)
    works()


def check_bad_local_input_raises_value_error_naming_rank():
    e = expect(ValueError, "root rank %d is out of range" % n,
               lambda: hvd.broadcast(torch.ones(2), n))
    assert "rank %d" % r in str(e), e
    expect(ValueError, "unsupported tensor dtype complex64 (rank %d)" % r,
           lambda: hvd.allreduce(torch.ones(2, dtype=torch.complex64)))
    # Named, in place, on the global set: the path gradients take.
    expect(hvd.HorovodInvalidArgumentError,
           "unsupported tensor dtype uint16 (rank %d)" % r,
           lambda: hvd.allreduce_(torch.ones(2, dtype=torch.uint16),
                                  name="uint16"))
    expect(ValueError, "bool", lambda: hvd.allreduce(torch.ones(2, dtype=torch.bool)))
    expect(ValueError, "supersedes average",
           lambda: hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum))
    expect(ValueError, "not registered",
           lambda: hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0])))
    works()


def check_ints_past_int_range_are_refused_by_value():
    # Python's ints are unbounded; narrowed by a cast, 2**32 + 1 would be
    # rank 1 or op 1 (Sum), a collective that runs on the wrong argument.
    for big in (2**32 + 1, -2**40):
        for call in (lambda: hvd.broadcast(torch.ones(2), big),
                     lambda: hvd.broadcast_(torch.ones(2), big, name="bigroot"),
                     lambda: hvd.broadcast_async(torch.ones(2), big)):
            e = expect(hvd.HorovodInvalidArgumentError,
                       "root rank %d is out of range: it must fit an int "
                       "(rank %d)" % (big, r), call)
            assert len(str(e)) < 200, str(e)
        for call in (lambda: hvd.allreduce(torch.ones(2), op=big),
                     lambda: hvd.allreduce_(torch.ones(2), op=big, name="bigop"),
                     lambda: hvd.allreduce_async_(torch.ones(2), op=big),
                     lambda: hvd.grouped_allreduce([torch.ones(2)], op=big),
                     lambda: hvd.reducescatter(torch.ones(2), op=big)):
            expect(hvd.HorovodInvalidArgumentError,
                   "reduce op %d is out of range: it must fit an int (rank %d)"
                   % (big, r), call)
    works()


def check_numbers_of_the_wrong_kind_are_refused_by_value():
    # int() would take a root of 1.5 as rank 1 and a float op as its int;
    # the engine's binding would answer with its signature.
    for call, what, shown in (
            (lambda: hvd.broadcast(torch.ones(2), 1.5), "root rank", "1.5"),
            (lambda: hvd.broadcast_(torch.ones(2), 0.0), "root rank", "0.0"),
            (lambda: hvd.allreduce(torch.ones(2), op=1.0), "reduce op", "1.0"),
            (lambda: hvd.allreduce_(torch.ones(2), name="f", op=1.0),
             "reduce op", "1.0"),
            (lambda: hvd.grouped_allreduce([torch.ones(2)], op="1"),
             "reduce op", "'1'")):
        expect(TypeError, "%s must be an integer, got %s (rank %d)"
               % (what, shown, r), call)
    for call in (lambda: hvd.allreduce(torch.ones(2), prescale_factor="2"),
                 lambda: hvd.allreduce_(torch.ones(2), postscale_factor=None,
                                        name="g"),
                 lambda: hvd.grouped_allreduce([torch.ones(2)],
                                               postscale_factor=[2])):
        expect(TypeError, "factor must be a number, got", call)
    # Integers of other types and real numbers with __float__ are taken.
    close(hvd.broadcast(torch.full((2,), float(r)), torch.tensor(n - 1)),
          torch.full((2,), float(n - 1)))
    close(hvd.allreduce(torch.ones(2), op=torch.tensor(hvd.Sum),
                        prescale_factor=torch.tensor(2.0), postscale_factor=3),
          torch.full((2,), 6.0 * n))
    works()


def check_bad_process_set_ranks_are_refused_naming_them():
    for ranks in ([0, 2**40], [0, 0], [n], [-1], []):
        e = expect(hvd.HorovodInvalidArgumentError,
                   "invalid process set ranks %s for a job of size %d"
                   % (ranks, n),
                   lambda: hvd.add_process_set(ranks))
        assert "(rank %d)" % r in str(e), e
    for ranks in ([0, 1.5], ["0"]):
        expect(ValueError, "process set ranks must be integers, got %r"
               % (ranks,), lambda: hvd.add_process_set(ranks))
    # Every rank still registers the same sets in the same order.
    ps = hvd.add_process_set(list(range(n)))
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=ps),
          torch.full((2,), float(n)))
    hvd.remove_process_set(ps)
    works()


def check_unknown_handle_synchronizes_to_none():
    assert hvd.synchronize(12345678) is None
    expect(ValueError, "unknown or already synchronized handle",
           lambda: hvd.poll(12345678))


def check_version_is_upstream_api_level():
    major, minor = (int(x) for x in horovod.__version__.split(".")[:2])
    assert (major, minor) >= (0, 28), horovod.__version__


def check_init_after_shutdown():
    hvd.shutdown()
    assert not hvd.is_initialized()
    expect(ValueError, "has not been initialized", lambda: hvd.rank())
    expect(ValueError, "has not been initialized",
           lambda: hvd.allreduce(torch.ones(1)))
    hvd.init()
    works()


def check_init_comm_must_name_every_rank():
    # A list naming every rank once starts the job as init() does; one
    # naming a subset (upstream's job of those ranks alone) is refused on
    # every rank, the engine it started shut down, and init() works after.
    for every in (list(reversed(range(n))), []):  # [] is upstream's default
        hvd.shutdown()
        hvd.init(comm=every)
        works()
    hvd.shutdown()
    for comm in ([0], list(range(n)) + [0], ["a"],
                 [k + 0.5 for k in range(n)]):
        e = expect(ValueError, "must name every rank of the job (0 to %d)"
                   % (n - 1), lambda: hvd.init(comm=comm))
        assert "rank %d" % r in str(e), e
        assert not hvd.is_initialized()
    hvd.init()
    works()


def check_objects_that_cannot_be_pickled_fail_on_every_rank():
    # The rank that cannot pickle its object raises its own error; its
    # peers, instead of waiting for bytes that never come, raise one that
    # names it; the job goes on.
    import threading
    lock = threading.Lock()
    if r == 0:
        expect(TypeError, "cannot pickle", lambda: hvd.broadcast_object(lock))
    else:
        expect(hvd.HorovodInvalidArgumentError,
               "broadcast_object: rank 0 could not pickle its object: "
               "TypeError: cannot pickle", lambda: hvd.broadcast_object(None))
    bad = n - 1
    if r == bad:
        expect(TypeError, "cannot pickle", lambda: hvd.allgather_object(lock))
    else:
        expect(hvd.HorovodInvalidArgumentError,
               "allgather_object: rank %d could not pickle its object" % bad,
               lambda: hvd.allgather_object(r))
    ps = hvd.add_process_set([0, bad])  # and on a process set
    if r == 0:
        expect(hvd.HorovodInvalidArgumentError,
               "allgather_object: rank %d could not pickle its object" % bad,
               lambda: hvd.allgather_object(r, process_set=ps))
    elif r == bad:
        expect(TypeError, "cannot pickle", lambda: hvd.allgather_object(
            lock, process_set=ps))
    hvd.remove_process_set(ps)
    assert hvd.allgather_object(r) == list(range(n))
    assert hvd.broadcast_object(r, root_rank=bad) == bad


def check_input_one_rank_refuses_fails_the_peers_and_the_job_goes_on():
    # Rank 0 refuses its own input (a dtype, a root, a number of the wrong
    # kind); the others, whose input is fine, fail at once with its reason
    # instead of waiting for it, and every rank goes on from there: a
    # cached steady-state tensor, a group and unnamed ops alike.
    x = torch.ones(3)
    for _ in range(5):
        hvd.allreduce(x, name="steady", op=hvd.Sum)
    cases = [
        ("allreduce of tensor 'allreduce.steady' was refused by rank 0: "
         "unsupported tensor dtype complex64 (rank 0)",
         lambda bad: hvd.allreduce(torch.ones(3, dtype=torch.complex64)
                                   if bad else x, name="steady", op=hvd.Sum)),
        ("allreduce of tensor 'grouped_allreduce.noname.",
         lambda bad: hvd.grouped_allreduce(
             [x, torch.ones(2, dtype=torch.uint16) if bad else x])),
        ("was refused by rank 0: broadcast root rank %d is out of range"
         % (n + 5),
         lambda bad: hvd.broadcast(x, n + 5 if bad else 0)),
        ("was refused by rank 0: root rank must be an integer, got 1.5",
         lambda bad: hvd.broadcast_(x.clone(), 1.5 if bad else 0,
                                    name="inplace")),
    ]
    # Input torch cannot hand to the engine, on every path: the C
    # per-gradient call, in and out of place, groups, each collective.
    meta = torch.ones(3, device="meta")
    sparse = torch.ones(3).to_sparse()
    with warnings.catch_warnings():  # quantized tensors are deprecated
        warnings.simplefilter("ignore")
        quantized = torch.quantize_per_tensor(torch.ones(3), 0.1, 0,
                                              torch.quint8)
    cases += [
        ("was refused by rank 0: a tensor on the meta device has no data",
         lambda bad: hvd.synchronize(hvd.allreduce_async_(
             meta if bad else x.clone(), name="fast", op=hvd.Sum))),
        ("was refused by rank 0: a tensor on the meta device has no data",
         lambda bad: hvd.allreduce(meta if bad else x)),
        ("was refused by rank 0: horovod.torch collectives take dense "
         "tensors, got a sparse_coo tensor (rank 0); a sparse gradient",
         lambda bad: hvd.allreduce_(sparse if bad else x.clone())),
        ("was refused by rank 0: horovod.torch collectives take torch "
         "tensors, got list (rank 0)",
         lambda bad: hvd.grouped_allreduce_([x.clone(), [1.0] if bad
                                             else x.clone()])),
        ("was refused by rank 0: unsupported tensor dtype quint8 (rank 0)",
         lambda bad: hvd.grouped_allreduce([quantized if bad else x])),
        ("was refused by rank 0: horovod.torch collectives take dense "
         "tensors, got a nested tensor",
         lambda bad: hvd.allgather(torch.nested.nested_tensor(
             [x, x], layout=torch.jagged) if bad else x)),
        ("was refused by rank 0: a tensor on the meta device",
         lambda bad: hvd.grouped_allgather([x, meta if bad else x])),
        ("was refused by rank 0: horovod.torch collectives take torch "
         "tensors, got tuple",
         lambda bad: hvd.broadcast((1, 2) if bad else x, 0)),
        ("was refused by rank 0: alltoall splits must be integers",
         lambda bad: hvd.alltoall(torch.ones(n), [0.5] * n if bad else None)),
        ("was refused by rank 0: a tensor on the meta device",
         lambda bad: hvd.reducescatter(meta if bad else x, op=hvd.Sum)),
        ("was refused by rank 0: a tensor on the meta device",
         lambda bad: hvd.grouped_reducescatter([meta if bad else x])),
        ("was refused by rank 0: sparse_allreduce_async takes a sparse COO "
         "tensor, got a strided tensor (rank 0)",
         lambda bad: hvd.sparse_allreduce_async(x if bad else sparse,
                                                "sparse", hvd.Sum)()),
        ("'allgather.noname.",  # both allgathers refused, unnamed too
         lambda bad: hvd.sparse_allreduce_async(x if bad else sparse, None,
                                                hvd.Sum)()),
        ("was refused by rank 0: sparse_allreduce_async reduces by Average "
         "or Sum, got op Max (4)",
         lambda bad: hvd.sparse_allreduce_async(
             sparse, "sparse", hvd.Max if bad else hvd.Sum)()),
    ]
    for said, call in cases:
        if r == 0:
            e = expect(Exception, "rank 0", lambda: call(True))
            assert "was refused" not in str(e), e  # its own error
        else:
            expect(hvd.HorovodInternalError, said, lambda: call(False))
        close(hvd.allreduce(x, name="steady", op=hvd.Sum),
              torch.full((3,), float(n)))
    close(hvd.allreduce(x * (r + 1), op=hvd.Sum),
          torch.full((3,), float(sum(range(1, n + 1)))))
