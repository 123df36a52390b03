"""Synthetic training throughput with Horovod, with upstream's flags:

    horovodrun -np 2 python examples/pytorch_synthetic_benchmark.py --model resnet18

Models are written in plain torch (torchvision is not required).
"""

import argparse
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import horovod.torch as hvd


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.c1 = nn.Conv2d(cin, width, 1, bias=False)
        self.b1 = nn.BatchNorm2d(width)
        self.c2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.b2 = nn.BatchNorm2d(width)
        self.c3 = nn.Conv2d(width, cout, 1, bias=False)
        self.b3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.b1(self.c1(x)))
        out = F.relu(self.b2(self.c2(out)))
        out = self.b3(self.c3(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for i, n in enumerate(layers):
            width = 64 * 2 ** i
            for j in range(n):
                blocks.append(block(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


MODELS = {
    "resnet18": lambda: ResNet(BasicBlock, [2, 2, 2, 2]),
    "resnet34": lambda: ResNet(BasicBlock, [3, 4, 6, 3]),
    "resnet50": lambda: ResNet(Bottleneck, [3, 4, 6, 3]),
    "resnet101": lambda: ResNet(Bottleneck, [3, 4, 23, 3]),
}


def main():
    p = argparse.ArgumentParser(
        description="PyTorch Synthetic Benchmark",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--fp16-allreduce", action="store_true", default=False,
                   help="use fp16 compression during allreduce")
    p.add_argument("--model", type=str, default="resnet50",
                   choices=sorted(MODELS), help="model to benchmark")
    p.add_argument("--batch-size", type=int, default=32, help="input batch size")
    p.add_argument("--image-size", type=int, default=224, help="input image size")
    p.add_argument("--num-warmup-batches", type=int, default=10,
                   help="number of warm-up batches that don't count towards benchmark")
    p.add_argument("--num-batches-per-iter", type=int, default=10,
                   help="number of batches per benchmark iteration")
    p.add_argument("--num-iters", type=int, default=10,
                   help="number of benchmark iterations")
    p.add_argument("--no-cuda", action="store_true", default=False,
                   help="disables CUDA training")
    p.add_argument("--use-adasum", action="store_true", default=False,
                   help="use adasum algorithm to do reduction")
    p.add_argument("--num-threads", type=int, default=0,
                   help="intra-op threads per rank (0: torch's default)")
    args = p.parse_args()

    hvd.init()
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    if not args.no_cuda and torch.cuda.is_available():
        raise SystemExit("this build runs on the CPU; pass --no-cuda")
    torch.manual_seed(0)
    model = MODELS[args.model]()
    lr_scaler = 1 if args.use_adasum else hvd.size()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=compression, op=hvd.Adasum if args.use_adasum else hvd.Average)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    log("Model: %s" % args.model)
    log("Batch size: %d" % args.batch_size)
    log("Number of CPUs: %d" % hvd.size())
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per CPU" % (x, img_sec))
        img_secs.append(img_sec)
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per CPU: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d CPU(s): %.1f +-%.1f"
        % (hvd.size(), hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))
    hvd.shutdown()


if __name__ == "__main__":
    main()
