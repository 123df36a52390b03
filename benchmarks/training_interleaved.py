"""The training rows' ratios measured within one np=2 job, its cases
interleaved in short blocks: one rank training alone while the other
sleeps (np=1), both ranks in lockstep without the gradient exchange, and
both training with DistributedOptimizer (np=2).

  horovodrun -np 2 python benchmarks/training_interleaved.py --model resnet18 ...

run.sh's other training rows start a job per case, a minute apart, and
this machine's speed drifts on that scale (one round's np=2-over-np=1 ratio
has ranged from 0.93 to 2.74 within one run). Here each of --num-iters
cycles runs every case for --num-batches-per-iter batches in turn (run.sh:
one), each case's block starting from a barrier, so a ratio compares cases
measured within a second of each other; report.py takes the ratios per
cycle and reports their median.

Each case trains its own copy of the synthetic benchmark's model (the
same model, batch and one compute thread per rank): the np=2 case through
DistributedOptimizer as examples/pytorch_synthetic_benchmark.py does, the
others with the plain optimizer. In the np=1 case the idle rank waits for
the next cycle on an allreduce it polls every few milliseconds, and its
process's CPU time over the block is reported, as a check that the
training rank had the other core to itself as in a job of one rank.

Prints per cycle "TRAINI,<case>,<np>,<img/s>" (img/s over all ranks), then
"IDLE_CPU,<fraction>": the idle rank's CPU seconds per second of the np=1
blocks.
"""
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd
from synthetic_loop import MODELS, parse_args

CASES = ("solo", "lockstep", "hvd")


def main():
    args = parse_args()
    hvd.init()
    if hvd.size() != 2:
        raise SystemExit("training_interleaved.py runs at np=2, not %d" % hvd.size())
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))

    def plain():
        model = MODELS[args.model]()
        return model, torch.optim.SGD(model.parameters(), lr=0.01)

    solo_model, solo_opt = plain()
    lock_model, lock_opt = plain()
    hvd_model = MODELS[args.model]()
    hvd_opt = hvd.DistributedOptimizer(
        torch.optim.SGD(hvd_model.parameters(), lr=0.01 * hvd.size()),
        named_parameters=hvd_model.named_parameters())
    hvd.broadcast_parameters(hvd_model.state_dict(), root_rank=0)
    meet = torch.zeros(1)

    def train(model, opt):
        opt.zero_grad()
        F.cross_entropy(model(data), target).backward()
        opt.step()

    def lockstep():
        train(lock_model, lock_opt)
        hvd.allreduce_(meet, name="interleaved.lockstep")

    steps = {"solo": lambda: train(solo_model, solo_opt), "lockstep": lockstep,
             "hvd": lambda: train(hvd_model, hvd_opt)}
    idle = [0.0, 0.0]  # the idle rank's CPU seconds, wall seconds

    def block(case, batches):
        """Runs `batches` of `case` and returns rank 0's img/s over all the
        ranks training in it (the lockstep cases run at the slower rank's
        pace, so rank 0's time is the job's)."""
        hvd.barrier()
        if case == "solo" and hvd.rank() != 0:
            c0, w0 = time.process_time(), time.perf_counter()
            h = hvd.allreduce_async_(torch.zeros(1), name="interleaved.solo")
            while not hvd.poll(h):
                time.sleep(0.002)
            hvd.synchronize(h)
            idle[0] += time.process_time() - c0
            idle[1] += time.perf_counter() - w0
            return None
        t0 = time.perf_counter()
        for _ in range(batches):
            steps[case]()
        t = time.perf_counter() - t0
        if case == "solo":
            hvd.allreduce_(torch.zeros(1), name="interleaved.solo")
        return args.batch_size * batches * (1 if case == "solo" else hvd.size()) / t

    for case in CASES:  # warm-up: every model's first batches are slower
        block(case, args.num_warmup_batches)
    for _ in range(args.num_iters):
        for case in CASES:
            rate = block(case, args.num_batches_per_iter)
            if hvd.rank() == 0:
                print("TRAINI,%s,%d,%.2f" % (case, 1 if case == "solo" else 2, rate),
                      flush=True)
    if hvd.rank() != 0:
        print("IDLE_CPU,%.4f" % (idle[0] / idle[1] if idle[1] else float("nan")),
              flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
