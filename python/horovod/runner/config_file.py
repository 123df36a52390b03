"""`horovodrun --config-file`: a YAML file of the same settings as the
tuning, timeline, stall-check and logging flags, in upstream's layout:

    controller: gloo              # or mpi (launch through mpirun)
    params: {fusion_threshold_mb: 32, cycle_time_ms: 2, cache_capacity: 1024,
             hierarchical_allreduce: false}
    autotune: {enabled: true, log_file: at.csv, warmup_samples: 3,
               steps_per_sample: 10, bayes_opt_max_samples: 20,
               gaussian_process_noise: 0.8}
    timeline: {filename: tl.json, mark_cycles: true}
    stall_check: {enabled: true, warning_time_seconds: 60,
                  shutdown_time_seconds: 0}
    logging: {level: INFO, with_timestamp: false}

A flag given on the command line wins over the file. A key this build does
not know, or a value of the wrong type, is an error naming it.
"""

# (section, key) -> (argument, type); a type of "negate" stores the
# inverted bool, "hierarchical" the flag's "1"/"0".
_KEYS = {
    ("params", "fusion_threshold_mb"): ("fusion_threshold_mb", float),
    ("params", "cycle_time_ms"): ("cycle_time_ms", float),
    ("params", "cache_capacity"): ("cache_capacity", int),
    ("params", "hierarchical_allreduce"): ("hierarchical", "hierarchical"),
    ("params", "hierarchical_allgather"): ("hierarchical_gather",
                                           "hierarchical"),
    ("autotune", "enabled"): ("autotune", bool),
    ("autotune", "log_file"): ("autotune_log_file", str),
    ("autotune", "warmup_samples"): ("autotune_warmup_samples", int),
    ("autotune", "steps_per_sample"): ("autotune_steps_per_sample", int),
    ("autotune", "bayes_opt_max_samples"): ("autotune_bayes_opt_max_samples",
                                            int),
    ("autotune", "gaussian_process_noise"): ("autotune_gaussian_process_noise",
                                             float),
    ("timeline", "filename"): ("timeline_filename", str),
    ("timeline", "mark_cycles"): ("timeline_mark_cycles", bool),
    ("stall_check", "enabled"): ("no_stall_check", "negate"),
    ("stall_check", "warning_time_seconds"):
        ("stall_check_warning_time_seconds", float),
    ("stall_check", "shutdown_time_seconds"):
        ("stall_check_shutdown_time_seconds", float),
    ("logging", "level"): ("log_level", str),
    ("logging", "with_timestamp"): ("log_hide_timestamp", "negate"),
}

# Upstream keys for what this build does not have.
_UNSUPPORTED = {
    ("library_options", "mpi_threads_disable"):
        "there is no MPI controller in this build",
    ("library_options", "num_nccl_streams"): "this build has no NCCL (CPU engine)",
    ("library_options", "ccl_bgt_affinity"): "this build has no oneCCL",
    ("library_options", "gloo_timeout_seconds"):
        "there is no Gloo controller in this build",
}


class ConfigError(Exception):
    pass


def _typed(where, value, kind):
    if kind in (bool, "negate", "hierarchical"):
        if not isinstance(value, bool):
            raise ConfigError("%s must be true or false, not %r" % (where, value))
        return {bool: value, "negate": not value,
                "hierarchical": "1" if value else "0"}[kind]
    if kind is str:
        if not isinstance(value, str):
            raise ConfigError("%s must be a string, not %r" % (where, value))
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            kind is int and not isinstance(value, int)):
        raise ConfigError("%s must be %s, not %r" % (
            where, "a whole number" if kind is int else "a number", value))
    if value < 0:
        raise ConfigError("%s must be >= 0, not %r" % (where, value))
    return kind(value)


def settings(path):
    """{argument: value} from the file at path; raises ConfigError."""
    try:
        import yaml
    except ImportError:
        raise ConfigError("--config-file needs PyYAML (pip install pyyaml)")
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError("cannot read %s: %s" % (path, e.strerror))
    except yaml.YAMLError as e:
        raise ConfigError("%s is not valid YAML: %s" % (path, e))
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError("%s must hold a mapping of sections" % path)
    out = {}
    for section, body in doc.items():
        if section == "controller":
            if body not in ("gloo", "mpi"):
                raise ConfigError("%s: controller must be gloo or mpi, not %r"
                                  % (path, body))
            out["mpi"] = body == "mpi"
            continue
        if section == "verbose":
            out["verbose"] = _typed("%s: verbose" % path, body, bool)
            continue
        if not isinstance(body, dict):
            raise ConfigError("%s: %s must be a mapping" % (path, section))
        for key, value in body.items():
            where = "%s: %s.%s" % (path, section, key)
            if (section, key) in _UNSUPPORTED:
                raise ConfigError("%s is not supported by this build: %s"
                                  % (where, _UNSUPPORTED[(section, key)]))
            if (section, key) not in _KEYS:
                raise ConfigError("%s is not a setting horovodrun knows" % where)
            arg, kind = _KEYS[(section, key)]
            out[arg] = _typed(where, value, kind)
    return out


def apply(args, path, given):
    """Sets each argument from the file unless the command line gave it
    (`given`: the argument names the command line set)."""
    for arg, value in settings(path).items():
        if arg not in given:
            setattr(args, arg, value)
