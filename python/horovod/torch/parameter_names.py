"""The names a DistributedOptimizer reduces its parameters' gradients
under: named_parameters' names, or upstream's unnamed form for a
parameter's group and place. Pure functions of their arguments."""


def checked_names(param_groups, named_parameters):
    """(name, parameter) pairs for every parameter of `param_groups`, with
    upstream's names for parameters given without names and its checks."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [
            ("allreduce.noname.%d.%d" % (i, j), v)
            for i, group in enumerate(param_groups)
            for j, v in enumerate(group["params"])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples "
                         "(name, parameter), usually produced by "
                         "model.named_parameters().")
    names = [k for k, _ in named_parameters]
    dups = {k for k in names if names.count(k) > 1}
    if dups:
        raise ValueError("Parameter names in named_parameters must be "
                         "unique. Found duplicates: %s" % ", ".join(sorted(dups)))
    known = {id(v) for _, v in named_parameters}
    unnamed = [p for g in param_groups for p in g["params"]
               if id(p) not in known]
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more "
                         "model parameters were not named. Python object "
                         "ids: %s" % ", ".join(str(id(p)) for p in unnamed))
    return named_parameters


def added_names(param_groups, names):
    """Names for the parameters of the group added last: those
    named_parameters gave (`names`: parameter to name), else upstream's
    unnamed form for their group and place."""
    gi = len(param_groups) - 1
    return [names.get(p, "allreduce.noname.%d.%d" % (gi, j))
            for j, p in enumerate(param_groups[-1]["params"])]
