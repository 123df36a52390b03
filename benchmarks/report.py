"""Turns a benchmarks/run.sh results folder into report.md and PNG plots.

  python benchmarks/report.py benchmarks/results/<date>
"""
import csv
import os
import statistics
import sys


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


LINKS = {}  # tag -> (rate in bytes/s, delay text), from LINK lines


def rate_bytes(text):
    units = {"kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8}
    for u, k in units.items():
        if text.lower().endswith(u):
            return float(text[:-len(u)]) * k
    return float("nan")


def load(folder):
    res, fusion, train, tune = {}, {}, {}, []
    STARTUP.clear()
    IDLE_CPU.clear()
    with open(os.path.join(folder, "results.csv")) as f:
        for r in csv.reader(f):
            if not r:
                continue
            if r[0] == "RESULT" and len(r) >= 11:
                res[(r[1], int(r[2]), int(r[3]))] = dict(
                    med=float(r[6]), busbw=float(r[9]), ok=r[10])
            elif r[0] == "FUSION" and len(r) >= 5:
                fusion.setdefault(r[2], []).append(float(r[3]))
            elif r[0] == "LINK" and len(r) >= 4:
                LINKS[r[1]] = (rate_bytes(r[2]), r[3])
            elif r[0] == "AUTOTUNE":
                tune.append(r[1:])
            elif r[0] == "STARTUP" and len(r) >= 8:
                STARTUP.append(r[1:])
            elif r[0] in ("TRAIN", "TRAINI") and len(r) >= 4:
                # TRAINI: training_interleaved.py's cycles, in order, so
                # that paired_ratio pairs each cycle's cases.
                case = r[1] if r[0] == "TRAIN" else "interleaved-" + r[1]
                try:
                    train.setdefault((case, int(r[2])), []).append(float(r[3]))
                except ValueError:
                    pass
            elif r[0] == "IDLE_CPU" and len(r) >= 2:
                IDLE_CPU.append(float(r[1]))
    return res, fusion, train, tune


# The idle rank's CPU seconds per second in training_interleaved.py's np=1
# blocks, one value per job.
IDLE_CPU = []

# Start-up rows (cluster_startup.py): label, np, median, min, max seconds to
# the first collective, median seconds to return, trials.
STARTUP = []


def startup_table():
    rows = ["| how | np | first collective, median (min-max) s | call returns, median s | trials |",
            "|---|---:|---:|---:|---:|"]
    for r in STARTUP:
        rows.append(f"| {r[0]} | {r[1]} | {float(r[2]):.3f} ({float(r[3]):.3f}-{float(r[4]):.3f}) "
                    f"| {float(r[5]):.3f} | {r[6]} |")
    return "\n".join(rows)


def autotune_table(tune):
    rows = ["| run | fusion threshold | cycle time (ms) | median step (µs) |",
            "|---|---:|---:|---:|"]
    for r in tune:
        if r[0] in ("grid", "tuned", "best_again") and len(r) >= 4:
            rows.append(f"| {r[0]} | {human(int(r[1]))} | {r[2]} | {float(r[3]):.0f} |")
    return "\n".join(rows)


def tables(res):
    out = []
    for np_ in sorted({k[1] for k in res}):
        labels = sorted({k[0] for k in res if k[1] == np_})
        sizes = sorted({k[2] for k in res if k[1] == np_})
        over = " (oversubscribed: more ranks than cores)" if np_ > os.cpu_count() else ""
        for title, key, fmt in (("median time per allreduce, µs", "med", "{:.1f}"),
                                ("busbw, GB/s", "busbw", "{:.2f}")):
            out += [f"\n**np={np_}{over}: {title}**\n",
                    "| size | " + " | ".join(labels) + " |",
                    "|---:|" + "---:|" * len(labels)]
            for s in sizes:
                cells = []
                for l in labels:
                    r = res.get((l, np_, s))
                    cells.append("–" if r is None else
                                 fmt.format(r[key]) + ("" if r["ok"] == "OK" else " FAIL"))
                out.append(f"| {human(s)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def hosts_table(res):
    """np=4 as two simulated hosts: hierarchical vs flat allreduce."""
    sizes = sorted({k[2] for k in res if k[0] == "hvd-2hosts-hier" and k[1] == 4})
    if not sizes:
        return "(not run: `bash benchmarks/run.sh hosts`)"
    rows = ["| size | hierarchical µs | flat µs | hierarchical busbw | flat busbw | speedup |",
            "|---:|---:|---:|---:|---:|---:|"]
    for s in sizes:
        h, f = res.get(("hvd-2hosts-hier", 4, s)), res.get(("hvd-2hosts-flat", 4, s))
        if h is None or f is None:
            continue
        rows.append(f"| {human(s)} | {h['med']:.1f} | {f['med']:.1f} | {h['busbw']:.2f} | "
                    f"{f['busbw']:.2f} | {f['med'] / h['med']:.2f}x |")
    return "\n".join(rows)


def multihost_table(res):
    """Two namespace hosts of two ranks on shaped links. Link use: the
    allreduce's bytes over its time, times 2(h-1)/h for h = 2 hosts (what
    each host must send over its link at the least), over the link's rate."""
    if not LINKS:
        return "(not run: `bash benchmarks/run.sh multihost`, as root)"
    out = []
    for tag, (rate, delay) in LINKS.items():
        labels = [l for l in (f"hvd-2x2-{tag}", f"hvd-2x2-leader-{tag}",
                              f"hvd-2x2-flat-{tag}",
                              f"hvd-2x2-mac-{tag}", f"ompi-2x2-{tag}",
                              f"torch-gloo-2x2-{tag}")
                  if any(k[0] == l for k in res)]
        sizes = sorted({k[2] for k in res if k[0] in labels})
        out += [f"\n**{tag} links (delay: {delay}): median µs (link use)**\n",
                "| size | " + " | ".join(labels) + " |",
                "|---:|" + "---:|" * len(labels)]
        for size in sizes:
            cells = []
            for l in labels:
                r = res.get((l, 4, size))
                if r is None:
                    cells.append("–")
                    continue
                use = size / (r["med"] * 1e-6) * 2 * (2 - 1) / 2 / rate
                cells.append(f"{r['med']:.1f} ({use:.0%})" +
                             ("" if r["ok"] == "OK" else " FAIL"))
            out.append(f"| {human(size)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def plots(res, folder):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    for np_ in sorted({k[1] for k in res}):
        for key, ylabel, name in (("busbw", "busbw (GB/s)", "busbw"),
                                  ("med", "median time per call (µs)", "latency")):
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for l in sorted({k[0] for k in res if k[1] == np_}):
                pts = sorted((k[2], v[key]) for k, v in res.items() if k[0] == l and k[1] == np_)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        linewidth=2.5 if l.startswith("hvd") else 1.2, label=l)
            ax.set_xscale("log", base=2)
            if key == "med":
                ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"allreduce float32, np={np_}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            fname = f"{name}_np{np_}.png"
            fig.savefig(os.path.join(folder, fname), dpi=90)
            plt.close(fig)
            made.append(fname)
    return made


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def median_of(values):
    return None if not values else statistics.median(values)


def paired_ratios(rounds, a, b):
    """Each round's rounds[a] over rounds[b] (lists of a case's values, one
    per round), when there are as many of each; else []."""
    xs, ys = rounds.get(a), rounds.get(b)
    if not xs or not ys or len(xs) != len(ys):
        return []
    return [x / y for x, y in zip(xs, ys) if y]


def paired_ratio(rounds, a, b):
    """rounds[a] over rounds[b]: with as many rounds of each (run.sh runs
    them interleaved), the median of each round's ratio, so a slow phase of
    the machine weighs on both sides of a ratio alike; else the ratio of
    the medians."""
    xs, ys = rounds.get(a), rounds.get(b)
    if not xs or not ys:
        return None
    if len(xs) == len(ys):
        ratios = paired_ratios(rounds, a, b)
        return statistics.median(ratios) if ratios else None
    return ratio(statistics.median(xs), statistics.median(ys))


def targets(res, fusion, train, tune):
    def get(label, np_, size, key):
        r = res.get((label, np_, size))
        return None if r is None else r[key]

    M = 1 << 20
    rows = []

    def row(case, ours, anchor, value, target, met=None):
        # Without `met` the row is a measurement beside the targets, with
        # no verdict of its own.
        fmt = (lambda x: "–" if x is None else f"{x:.3g}")
        if met is None:
            verdict = "(measured)"
        else:
            verdict = "–" if value is None else ("met" if met(value) else "missed")
        num = (lambda x: "–" if x is None else f"{x:.6g}")
        rows.append(f"| {case} | {num(ours)} | {num(anchor)} | {fmt(value)} | {target} "
                    f"| {verdict} |")

    a = get("hvd-shm", 2, 64 * M, "busbw"); b = get("ompi-shm+tun", 2, 64 * M, "busbw")
    row("64 MiB, np=2, busbw", a, b, ratio(a, b), ">= 1.5x OpenMPI shm+tun", lambda v: v >= 1.5)
    a = get("hvd-shm", 4, 256 * M, "busbw"); b = get("ompi-shm+tun", 4, 256 * M, "busbw")
    row("256 MiB, np=4, busbw", a, b, ratio(a, b), ">= 1.5x OpenMPI shm+tun", lambda v: v >= 1.5)
    # The latency section's alternating jobs judge the 4 B target when the
    # run has them; the engine section's single job is then shown beside.
    pairs = [(get(f"lat-hvd-r{r}", 2, 4, "med"), get(f"lat-ompi-r{r}", 2, 4, "med"))
             for r in range(1, 100)]
    pairs = [(h, o) for h, o in pairs if h and o]  # rounds with both jobs
    lat = {"hvd": [h for h, _ in pairs], "ompi": [o for _, o in pairs]}
    a = get("hvd-shm", 2, 4, "med"); b = get("ompi-shm+tun", 2, 4, "med")
    row("4 B, np=2, C++ level (µs)", a, b, ratio(a, b), "<= 2x OpenMPI",
        None if lat["hvd"] else (lambda v: v <= 2))
    if lat["hvd"]:
        row("4 B, np=2, C++ level, alternating jobs (µs)" +
            rounds_note(paired_ratios(lat, "hvd", "ompi"), ".2f"),
            median_of(lat["hvd"]), median_of(lat["ompi"]),
            paired_ratio(lat, "hvd", "ompi"), "<= 2x OpenMPI", lambda v: v <= 2)
    a = get("hvd-shm", 4, 4, "med")
    row("4 B, np=4, C++ level (µs)", a, get("ompi-shm+tun", 4, 4, "med"), a, "<= 20 µs",
        lambda v: v <= 20)
    a = get("hvd-py", 2, 4, "med"); b = get("torch-gloo", 2, 4, "med")
    row("4 B from Python, np=2 (µs)", a, b, a, "<= 25 µs", lambda v: v <= 25)
    # Two busy processes beside the job: no worse than torch.distributed.
    for label, load in (("busy", "spinning"), ("busy-duty", "busy half the time")):
        a = get("hvd-py-" + label, 2, 4, "med")
        b = get("torch-gloo-" + label, 2, 4, "med")
        row(f"4 B, np=2, two processes {load} beside, vs torch gloo (µs)", a, b,
            ratio(a, b), "<= 1.0x", lambda v: v <= 1.0)
        a = get("hvd-py-" + label, 2, 64 * M, "busbw")
        b = get("torch-gloo-" + label, 2, 64 * M, "busbw")
        row(f"64 MiB, np=2, two processes {load} beside, vs torch gloo (busbw)",
            a, b, ratio(a, b), ">= 1.0x", lambda v: v >= 1.0)
    a = get("hvd-tcp", 2, 64 * M, "busbw"); b = get("gloo-ring_chunked", 2, 64 * M, "busbw")
    row("64 MiB TCP only, np=2, vs Gloo", a, b, ratio(a, b), ">= 1.2x", lambda v: v >= 1.2)
    b = get("ompi-tcp+tun", 2, 64 * M, "busbw")
    row("64 MiB TCP only, np=2, vs OpenMPI TCP", a, b, ratio(a, b), ">= 0.9x", lambda v: v >= 0.9)
    # From Python each call also pays the interpreter: 3x there, 1.5x in C++.
    for level, prefix, most in (("Python", "", 3.0), ("C++", "cpp:", 1.5)):
        many, one = prefix + "1000x4KiB", prefix + "1x4000KiB"
        row(f"1000 x 4 KiB vs 1 x 4 MiB, {level} (step µs)",
            median_of(fusion.get(many)), median_of(fusion.get(one)),
            paired_ratio(fusion, many, one), f"<= {most:g}x",
            lambda v, most=most: v <= most)
    many, one = "cpp-tcp:1000x4KiB", "cpp-tcp:1x4000KiB"
    if fusion.get(many):
        row("1000 x 4 KiB vs 1 x 4 MiB, C++, TCP through rank 0 (step µs)",
            median_of(fusion.get(many)), median_of(fusion.get(one)),
            paired_ratio(fusion, many, one), "(the multi-host path)")
    tuned = [float(r[3]) for r in tune if r[0] == "tuned"]
    grid = [float(r[3]) for r in tune if r[0] == "grid"]
    again = [float(r[3]) for r in tune if r[0] == "best_again"]
    if tuned and grid:
        t = statistics.median(tuned)
        row("autotune vs best grid point as the grid measured it (step µs)", t, min(grid),
            t / min(grid), "<= 1.1x", lambda v: v <= 1.1)
    if tuned and again:
        t, b = statistics.median(tuned), statistics.median(again)
        row("autotune vs best grid point re-measured beside it (step µs)", t, b, t / b,
            "<= 1.1x", lambda v: v <= 1.1)
    med = {k: median_of(v) for k, v in train.items()}
    h1, h2, d2 = med.get(("hvd", 1)), med.get(("hvd", 2)), med.get(("ddp", 2))
    row("training np=2 vs np=1 (img/s)", h2, h1,
        paired_ratio(train, ("hvd", 2), ("hvd", 1)), ">= 1.9x", lambda v: v >= 1.9)
    row("training np=2, ours vs DDP (img/s)", h2, d2,
        paired_ratio(train, ("hvd", 2), ("ddp", 2)), ">= 1.0x", lambda v: v >= 1.0)
    solo = med.get(("hvd-2-solo", 2))
    row("training np=2 vs two independent one-rank runs (img/s)", h2, solo,
        paired_ratio(train, ("hvd", 2), ("hvd-2-solo", 2)),
        "(two runs that never wait)")
    row("two independent one-rank runs vs np=1 (img/s)", solo, h1,
        paired_ratio(train, ("hvd-2-solo", 2), ("hvd", 1)),
        "(the most two processes reach)")
    lock = med.get(("hvd-lockstep", 2))
    row("training np=2 vs np=2 in lockstep without the gradient exchange (img/s)",
        h2, lock, paired_ratio(train, ("hvd", 2), ("hvd-lockstep", 2)),
        "(what the exchange costs)")
    row("np=2 in lockstep without the gradient exchange vs np=1 (img/s)", lock, h1,
        paired_ratio(train, ("hvd-lockstep", 2), ("hvd", 1)),
        "(the most synchronous np=2 reaches)")
    # The same ratios from one job whose cases take turns every few batches.
    ih1, ih2 = med.get(("interleaved-solo", 1)), med.get(("interleaved-hvd", 2))
    ilock = med.get(("interleaved-lockstep", 2))
    row("training np=2 vs np=1, interleaved in one job (img/s)", ih2, ih1,
        paired_ratio(train, ("interleaved-hvd", 2), ("interleaved-solo", 1)),
        "(the >= 1.9x row, cases seconds apart)")
    row("np=2 in lockstep without the gradient exchange vs np=1, interleaved (img/s)",
        ilock, ih1,
        paired_ratio(train, ("interleaved-lockstep", 2), ("interleaved-solo", 1)),
        "(the most synchronous np=2 reaches)")
    row("training np=2 vs lockstep, interleaved (img/s)", ih2, ilock,
        paired_ratio(train, ("interleaved-hvd", 2), ("interleaved-lockstep", 2)),
        "(what the exchange costs)")
    for fw, label in (("TensorFlow", "hvd-tf"),
                      ("TensorFlow in tf.function", "hvd-tf-jit"),
                      ("JAX", "hvd-jax"), ("JAX in jit", "hvd-jax-jit"),
                      ("JAX in jit, HOROVOD_KEEP_FREED_MEMORY=0",
                       "hvd-jax-jit-nokeep")):
        for torch_label, form in (("hvd-py", "in place"),
                                  ("hvd-py-oop", "out of place")):
            a, b = get(label, 2, 4, "med"), get(torch_label, 2, 4, "med")
            row(f"4 B, np=2, {fw} vs torch {form} (µs)", a, b, ratio(a, b),
                "<= 1.5x", lambda v: v <= 1.5)
            a = get(label, 2, 64 * M, "busbw")
            b = get(torch_label, 2, 64 * M, "busbw")
            row(f"64 MiB, np=2, {fw} vs torch {form} (busbw)", a, b,
                ratio(b, a), "<= 1.5x (time)", lambda v: v <= 1.5)
    k1, k2 = med.get(("keras-hvd", 1)), med.get(("keras-hvd", 2))
    row("Keras fit np=2 vs np=1 (img/s)", k2, k1,
        paired_ratio(train, ("keras-hvd", 2), ("keras-hvd", 1)), ">= 1.8x",
        lambda v: v >= 1.8)
    solo = med.get(("keras-2-solo", 2))
    row("Keras fit np=2 vs two independent one-rank runs (img/s)", k2, solo,
        paired_ratio(train, ("keras-hvd", 2), ("keras-2-solo", 2)),
        "(two runs that never wait)")
    loop, mwms = med.get(("keras-hvd-loop", 2)), med.get(("keras-mwms", 2))
    row("Keras custom loop np=2, ours vs MultiWorkerMirroredStrategy (img/s)",
        loop, mwms, paired_ratio(train, ("keras-hvd-loop", 2), ("keras-mwms", 2)),
        "> 1.0x", lambda v: v > 1.0)
    head = ["| case | ours | anchor | ratio (or value) | target | verdict |",
            "|---|---:|---:|---:|---|---|"]
    return "\n".join(head + rows)


def rounds_note(values, fmt):
    """" (rounds: a, b, c)" for a case measured in several rounds; past a
    dozen values (training_interleaved.py's cycles), their count and
    quartiles."""
    if len(values) < 2:
        return ""
    if len(values) > 12:
        q = statistics.quantiles(values, n=4)
        return (f" ({len(values)} cycles, quartiles {format(q[0], fmt)}-"
                f"{format(q[2], fmt)})")
    return " (rounds: " + ", ".join(format(x, fmt) for x in values) + ")"


def main():
    folder = sys.argv[1]
    res, fusion, train, tune = load(folder)
    pngs = plots(res, folder)
    parts = [f"# Benchmark run {os.path.basename(os.path.abspath(folder))}\n",
             "Produced by `bash benchmarks/run.sh`; raw logs and results.csv beside this file.\n",
             "## Targets\n", targets(res, fusion, train, tune),
             "\n## Fusion\n",
             "\n".join(f"- {k}: median step {statistics.median(v):.0f} µs"
                       + rounds_note(v, ".0f") for k, v in fusion.items()),
             "\n## Autotune vs grid search (fusion case, np=2)\n", autotune_table(tune),
             "\n## Job start-up: from the call to the first collective\n", startup_table(),
             "\n## Two simulated hosts of two ranks (np=4): hierarchical vs flat allreduce\n",
             hosts_table(res),
             "\n## Two namespace hosts of two ranks on shaped links\n",
             multihost_table(res),
             "\n## Training (torch: resnet18, 64 px, batch 16 per rank; Keras: "
             "small CNN, 32 px, batch 32 per worker; one compute thread per "
             "worker)\n",
             "\n".join(f"- {k[0]} np={k[1]}: {statistics.median(v):.1f} img/s total"
                       + rounds_note(v, ".1f") for k, v in sorted(train.items())),
             "".join(f"\n- the idle rank's CPU in the interleaved np=1 blocks: {x:.3f} s/s"
                     for x in IDLE_CPU),
             "\n## Allreduce tables\n", tables(res), "\n## Plots\n"]
    parts += [f"![{p}]({p})" for p in pngs]
    with open(os.path.join(folder, "report.md"), "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
