"""Framework-neutral pieces of gradient reduction shared by the
DistributedGradientTape and the distributed optimizers of every framework:
argument checks and the split of a step's gradients into units reduced
together."""

import numbers

from horovod.common.ops import Adasum, Average, Max, Min, Product, Sum

_OPS = ((Average, "Average"), (Sum, "Sum"), (Adasum, "Adasum"), (Min, "Min"),
        (Max, "Max"), (Product, "Product"))
_OP_VALUES = frozenset(value for value, _ in _OPS)


def op_named(op):
    """`op` as its name and value, e.g. "Max (4)", for errors."""
    name = dict(_OPS).get(op) if isinstance(op, numbers.Integral) else None
    return "%s (%d)" % (name, op) if name else repr(op)


def check_op(op):
    """A distributed optimizer's reduce op, refused when the optimizer is
    made rather than at its first step."""
    if isinstance(op, bool) or not isinstance(op, numbers.Integral) or \
            op not in _OP_VALUES:
        raise ValueError("unknown reduce op %r; the ops are %s" % (
            op, ", ".join("%s (%d)" % (n, v) for v, n in _OPS)))


def check_predivide(op, gradient_predivide_factor):
    """Upstream's check of gradient_predivide_factor, and ours: gradients
    are divided by it before the allreduce, so 0 would fail in the middle
    of a step. The op is checked first (check_op)."""
    check_op(op)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with "
                         "op != Average")
    if not gradient_predivide_factor:
        raise ValueError("gradient_predivide_factor must not be 0: gradients "
                         "are divided by it before the allreduce")


def check_passes(passes):
    """backward_passes_per_step: a whole number of passes, at least one (a
    float would be truncated, or compared against a pass count that never
    equals it)."""
    if isinstance(passes, bool) or not isinstance(passes, numbers.Integral) \
            or passes < 1:
        raise ValueError("backward_passes_per_step must be an integer of at "
                         "least 1, got %r" % (passes,))


def check_reduction_args(op, gradient_predivide_factor, groups):
    """Upstream's checks of a distributed optimizer's arguments."""
    check_predivide(op, gradient_predivide_factor)
    if groups is not None and not (
            isinstance(groups, list) or
            (isinstance(groups, int) and groups > 0)):
        raise ValueError("groups should be a non-negative integer or a "
                         "list of list of variables.")


def group_plan(variables, groups, key=id):
    """Positions 0..len(variables)-1 split into units reduced together: one
    unit per variable (groups None), `groups` contiguous units (an int), or
    the given lists of variables (the others one unit each). `key` gives a
    variable's identity."""
    count = len(variables)
    if groups is None:
        return [[i] for i in range(count)]
    if isinstance(groups, int):
        n = min(groups, count) or 1
        size, extra = divmod(count, n)
        plan, start = [], 0
        for g in range(n):
            end = start + size + (1 if g < extra else 0)
            if end > start:
                plan.append(list(range(start, end)))
            start = end
        return plan
    position = {key(v): i for i, v in enumerate(variables)}
    plan, taken = [], set()
    for group in groups:
        members = sorted({position[key(v)] for v in group
                          if key(v) in position} - taken)
        taken.update(members)
        if members:
            plan.append(members)
    plan.extend([i] for i in range(count) if i not in taken)
    return plan


def check_adasum_set(process_set, rank):
    """op=Adasum combines ranks pairwise, so a distributed optimizer needs a
    power-of-two number of them: refused when it is made, not at its first
    step."""
    members = process_set.size()
    if members & (members - 1):
        raise ValueError(
            "op=Adasum needs a power-of-two number of ranks; the process set "
            "has %d (rank %d)" % (members, rank))
