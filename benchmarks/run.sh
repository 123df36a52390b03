#!/usr/bin/env bash
# One command for the whole performance picture, in one run on one machine:
# the anchors from ../shared/bench (OpenMPI, Gloo, torch.distributed; copied
# to a scratch folder and built there), our engine at the C++ level over
# shared memory and over TCP, our Python level, tensor fusion, and training
# (our DistributedOptimizer at np=1/2 vs torch DDP at np=2). Writes
# benchmarks/results/<date>/ with results.csv, the raw logs, report.md and
# PNG plots.
#
#   bash benchmarks/run.sh                       # everything (~20 min on 2 cores)
#   NPS="2" BUDGET=0.5 bash benchmarks/run.sh engine python
#   ANCHORS=/path/to/shared/bench bash benchmarks/run.sh
# Sections: anchors engine latency hosts python frameworks busy fusion
# autotune training clusters multihost
# (default: all but multihost, which needs root for its test hosts).
# Needs `bash scripts/setup.sh` first (engine installed, OpenMPI present).
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
ANCHORS=${ANCHORS:-$REPO/../shared/bench}
NPS=${NPS:-"2 4"}
BUDGET=${BUDGET:-1.0}
# Training, fusion and 4 B latency rows: rounds, each running the cases a
# ratio compares (np=1 and np=2 and their anchors; one tensor and many; ours
# and OpenMPI) back to back; the report takes the median of each round's
# ratio.
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$REPO/benchmarks/results/$(date -u +%Y-%m-%d)}
SECTIONS=${*:-"anchors engine latency hosts python frameworks busy fusion autotune training"}
# multihost: the links' rates (tbf; this kernel has no netem, so no delay).
LINKS=${LINKS:-"10gbit 1gbit"}
MH_SIZES=${MH_SIZES:-4,1K,64K,1M,16M,64M}
TUN="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296"
OMPI="mpirun.openmpi --oversubscribe --bind-to none --mca pml ob1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"
: > "$OUT/results.csv"
cd "$REPO"

log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/log.txt"; }
# run NAME CMD...: output to NAME.txt; RESULT/FUSION/TRAIN/TRAINI/IDLE_CPU/AUTOTUNE lines (launcher
# prefixes stripped) collected in results.csv.
run() {
  local name=$1; shift
  log "run $name: $*"
  timeout 900 "$@" > "$OUT/$name.txt" 2>&1 || log "  rc=$? ($name)"
  grep -ohE '(RESULT|FUSION|TRAINI?|IDLE_CPU|AUTOTUNE|STARTUP),.*' "$OUT/$name.txt" >> "$OUT/results.csv"
}

# solo_pair NAME ROW PATTERN CMD...: CMD twice at once, as two independent
# one-rank runs (what this machine gives two processes that never wait for
# each other), outputs in NAME-a.txt and NAME-b.txt; the sum of the two
# rates that PATTERN's last field gives is the TRAIN row ROW at np=2 (nan
# when a run printed none).
solo_pair() {
  local name=$1 row=$2 pattern=$3; shift 3
  log "run $name (two at once): $*"
  ( "$@" > "$OUT/$name-a.txt" 2>&1 & "$@" > "$OUT/$name-b.txt" 2>&1; wait )
  local a b
  a=$(grep -ohE "$pattern" "$OUT/$name-a.txt" | grep -oE '[0-9.]+$')
  b=$(grep -ohE "$pattern" "$OUT/$name-b.txt" | grep -oE '[0-9.]+$')
  echo "TRAIN,$row,2,$(python -c "print('%.1f' % (float('${a:-nan}') + float('${b:-nan}')))")" >> "$OUT/results.csv"
}

anchors() {
  if [ ! -d "$ANCHORS" ]; then log "no anchors at $ANCHORS; skipped"; return; fi
  if ! dpkg -s libgloo-dev >/dev/null 2>&1; then
    apt-get install -y -q libgloo-dev >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q libgloo-dev >/dev/null; }
  fi
  local scratch; scratch=$(mktemp -d)
  cp -r "$ANCHORS"/. "$scratch"/ && chmod -R u+w "$scratch"
  OUT="$OUT/anchors" bash "$scratch/run_all.sh" build > "$OUT/anchors-build.txt" 2>&1
  local B=$scratch/build
  for np in $NPS; do
    run ompi-shm-np$np $OMPI -np $np --mca btl vader,self $B/mpi_allreduce_ompi -b $BUDGET -l ompi-shm
    run ompi-shm+tun-np$np $OMPI -np $np --mca btl vader,self -x GLIBC_TUNABLES=$TUN $B/mpi_allreduce_ompi -b $BUDGET -l ompi-shm+tun
    run ompi-tcp+tun-np$np $OMPI -np $np --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x GLIBC_TUNABLES=$TUN $B/mpi_allreduce_ompi -b $BUDGET -l ompi-tcp+tun
    [ -x $B/gloo_allreduce ] && run gloo-ring_chunked-np$np $B/gloo_allreduce -n $np -a ring_chunked -b $BUDGET
    run torch-gloo-np$np python "$scratch/torch_gloo.py" -n $np -b $BUDGET
  done
  rm -rf "$scratch"
}

build_engine() {
  cmake -S "$REPO" -B "$REPO/build-bench" -DCMAKE_BUILD_TYPE=Release \
    -DHOROVOD_BUILD_BENCHMARKS=ON > "$OUT/engine-build.txt" 2>&1 &&
    cmake --build "$REPO/build-bench" --target allreduce_bench -j 2 >> "$OUT/engine-build.txt" 2>&1
}

engine() {
  build_engine || { log "engine build failed"; return; }
  for np in $NPS; do
    run hvd-shm-np$np horovodrun -np $np build-bench/allreduce_bench -b $BUDGET -l hvd-shm
    run hvd-tcp-np$np env HOROVOD_SHM_DISABLE=1 horovodrun -np $np build-bench/allreduce_bench -b $BUDGET -l hvd-tcp
    # The data MAC's cost where nothing but the CPU limits TCP.
    run hvd-tcp-mac-np$np env HOROVOD_SHM_DISABLE=1 horovodrun --data-mac -np $np build-bench/allreduce_bench -b $BUDGET -l hvd-tcp-mac
  done
}

# 4 B at np=2 from C++, OpenMPI's and ours in alternating jobs, ROUNDS
# rounds of each: the rows of `anchors` and `engine` run minutes apart, and
# on this host a 4 B call's time can double from one such moment to the
# next. The report takes the median of the rounds' ratios.
latency() {
  build_engine || { log "engine build failed"; return; }
  if [ ! -f "$ANCHORS/mpi_allreduce.c" ]; then log "no anchors at $ANCHORS; skipped"; return; fi
  local scratch r; scratch=$(mktemp -d)
  mpicc.openmpi -O2 -o "$scratch/mpi_allreduce_ompi" "$ANCHORS/mpi_allreduce.c"
  for r in $(seq "$ROUNDS"); do
    run lat-ompi-np2-r$r $OMPI -np 2 --mca btl vader,self -x GLIBC_TUNABLES=$TUN \
      "$scratch/mpi_allreduce_ompi" -s 4 -b $BUDGET -l lat-ompi-r$r
    run lat-hvd-np2-r$r horovodrun -np 2 build-bench/allreduce_bench -s 4 -b $BUDGET -l lat-hvd-r$r
  done
  rm -rf "$scratch"
}

# np=4 as two simulated hosts of two ranks: hierarchical allreduce (shm
# within hosts, TCP between leaders) against one flat TCP ring.
hosts() {
  build_engine || { log "engine build failed"; return; }
  local S="bash benchmarks/sim_hosts.sh build-bench/allreduce_bench -b $BUDGET"
  run hvd-2hosts-hier-np4 horovodrun -np 4 $S -l hvd-2hosts-hier
  run hvd-2hosts-flat-np4 env HOROVOD_HIERARCHICAL_ALLREDUCE=0 horovodrun -np 4 $S -l hvd-2hosts-flat
}

python_level() {
  for np in $NPS; do
    run hvd-py-np$np horovodrun -np $np python benchmarks/py_allreduce.py -b $BUDGET -l hvd-py
  done
}

# The same allreduce from TensorFlow and JAX (eager and inside jit) beside
# the torch path in place and out of place (the form TF and JAX have), then
# Keras training: model.fit at np=1/2, a custom loop with
# DistributedGradientTape against MultiWorkerMirroredStrategy's, and two
# independent one-rank runs at once (what this machine allows np=2 at most).
frameworks() {
  local S="-s 4,1K,64K,1M,16M,64M -b $BUDGET"
  for np in $NPS; do
    run hvd-py-oop-np$np horovodrun -np $np python benchmarks/py_allreduce.py $S --out-of-place
    run hvd-tf-np$np horovodrun -np $np python benchmarks/framework_allreduce.py --framework tensorflow $S
    run hvd-tf-jit-np$np horovodrun -np $np python benchmarks/framework_allreduce.py --framework tensorflow --jit $S
    run hvd-jax-np$np horovodrun -np $np python benchmarks/framework_allreduce.py --framework jax $S
    run hvd-jax-jit-np$np horovodrun -np $np python benchmarks/framework_allreduce.py --framework jax --jit $S
    # XLA allocates each result afresh: without the engine's keeping freed
    # memory, each call faults in new pages (about 0.4 GB/s on this VM).
    run hvd-jax-jit-nokeep-np$np horovodrun -np $np env HOROVOD_KEEP_FREED_MEMORY=0 python benchmarks/framework_allreduce.py --framework jax --jit -l hvd-jax-jit-nokeep $S
  done
  local K=benchmarks/keras_synthetic.py r
  for r in $(seq "$ROUNDS"); do
    for np in 1 2; do
      run train-keras-np$np-r$r horovodrun -np $np python $K --mode hvd
      run train-keras-loop-np$np-r$r horovodrun -np $np python $K --mode hvd-loop
    done
    run train-keras-mwms-np2-r$r python $K --mode mwms --np 2
    solo_pair train-keras-solo-r$r keras-2-solo 'TRAIN,keras-hvd,1,[0-9.]+' \
      env HOROVOD_RANK=0 HOROVOD_SIZE=1 python $K --mode hvd
  done
}

# A busy machine: two processes on the 2 cores beside an np=2 job, as data
# loaders and other work run beside training: spinning all the time, then
# in 2 ms bursts with 2 ms sleeps between (a duty cycle of one half). Ours
# (the torch path, in place) and torch.distributed/gloo under each load.
busy() {
  local S="-s 4,64K,64M -b $BUDGET"
  local spin="while True: pass"
  local duty="import time
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.002: pass
    time.sleep(0.002)"
  local load label
  for load in spin duty; do
    label=busy; [ $load = duty ] && label=busy-duty
    local loaders=()
    for _ in 1 2; do
      python -c "${!load}" & loaders+=($!)
    done
    run hvd-py-$label-np2 horovodrun -np 2 python benchmarks/py_allreduce.py $S -l hvd-py-$label
    if [ -f "$ANCHORS/torch_gloo.py" ]; then
      run torch-gloo-$label-np2 python "$ANCHORS/torch_gloo.py" -n 2 $S -l torch-gloo-$label
    fi
    kill "${loaders[@]}" 2>/dev/null
    wait "${loaders[@]}" 2>/dev/null
  done
}

fusion() {
  build_engine || { log "engine build failed"; return; }
  local r
  for r in $(seq "$ROUNDS"); do
    run fusion-np2-r$r horovodrun -np 2 python benchmarks/fusion_bench.py
    run fusion-cpp-np2-r$r horovodrun -np 2 build-bench/allreduce_bench -f 1000x4K
    # Over TCP, negotiated through rank 0 (no ready board): the path every
    # job spanning hosts takes.
    run fusion-cpp-tcp-np2-r$r env HOROVOD_SHM_DISABLE=1 horovodrun -np 2 \
      build-bench/allreduce_bench -f 1000x4K -l tcp
  done
}

autotune() {
  run autotune-np2 python benchmarks/autotune_bench.py --np 2 --steps 30
}

# Start-up overhead: horovod.run, horovod.spark.run (local-cluster) and
# RayExecutor, from the call to the end of the first collective.
clusters() {
  run clusters-np2 python benchmarks/cluster_startup.py --np 2 --trials 5
}

# train_row NAME ROW NP: the TRAIN row ROW at NP from the "Total img/sec"
# line of NAME.txt (nan when the run printed none).
train_row() {
  local total
  total=$(grep -oE 'Total img/sec on [0-9]+ CPU\(s\): [0-9.]+' "$OUT/$1.txt" | awk '{print $NF}')
  echo "TRAIN,$2,$3,${total:-nan}" >> "$OUT/results.csv"
}

# Training: examples/pytorch_synthetic_benchmark.py at np=1 and 2, torch DDP
# at np=2, np=2 in lockstep without the gradient exchange, two independent
# one-rank runs at once, and np=1, lockstep and np=2 again in one job that
# alternates them batch by batch, in every round.
training() {
  local A="--model resnet18 --batch-size 16 --image-size 64 --num-warmup-batches 3 --num-batches-per-iter 5 --num-iters 5 --num-threads 1"
  local I="--model resnet18 --batch-size 16 --image-size 64 --num-warmup-batches 3 --num-batches-per-iter 1 --num-iters 40 --num-threads 1"
  local r np
  for r in $(seq "$ROUNDS"); do
    for np in 1 2; do
      run train-hvd-np$np-r$r horovodrun -np $np python examples/pytorch_synthetic_benchmark.py $A --no-cuda
      train_row train-hvd-np$np-r$r hvd $np
    done
    run train-ddp-np2-r$r torchrun --standalone --nproc_per_node 2 benchmarks/ddp_synthetic.py $A
    train_row train-ddp-np2-r$r ddp 2
    run train-lockstep-np2-r$r horovodrun -np 2 python benchmarks/lockstep_synthetic.py $A
    train_row train-lockstep-np2-r$r hvd-lockstep 2
    solo_pair train-solo-r$r hvd-2-solo 'Total img/sec on 1 CPU\(s\): [0-9.]+' \
      python examples/pytorch_synthetic_benchmark.py $A --no-cuda
    run train-interleaved-r$r horovodrun -np 2 python benchmarks/training_interleaved.py $I
  done
}

# Two test hosts (tests/multihost/testhosts.py), 2 ranks each, every host's
# egress shaped to a rate by tbf (this kernel has no netem for a delay):
# ours (horovodrun -H, hierarchical by default: striped; with one leader per
# host; flat; with the data MAC) against OpenMPI
# (mpirun -H over TCP) and torch.distributed/gloo (torchrun across the
# hosts), in the same run. The hosts share this machine's 2 cores, so a
# fast link is limited by CPU before the wire.
multihost() {
  build_engine || { log "engine build failed"; return; }
  if [ ! -d "$ANCHORS" ]; then log "no anchors at $ANCHORS; skipped"; return; fi
  local TH="python3 $REPO/tests/multihost/testhosts.py"
  $TH up 2 > "$OUT/multihost-up.txt" 2>&1 || { log "test hosts failed to start"; return; }
  local scratch; scratch=$(mktemp -d)
  cp -r "$ANCHORS"/. "$scratch"/ && chmod -R u+w "$scratch"
  mpicc.openmpi -O2 -o "$scratch/mpi_allreduce_ompi" "$scratch/mpi_allreduce.c"
  local rate tag burst
  for rate in $LINKS; do
    tag="$rate"
    # tbf's bucket must hold at least a timer tick of traffic: 2 ms here.
    burst=$(python3 -c "import re; m = re.match(r'([0-9.]+)(k|m|g)bit', '$rate'); print(int(float(m.group(1)) * {'k': 1e3, 'm': 1e6, 'g': 1e9}[m.group(2)] / 8 * 0.002))")
    for h in 1 2; do
      ip netns exec hvdt-h$h tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms
    done
    echo "LINK,$tag,$rate,none" >> "$OUT/results.csv"
    run hvd-2x2-$tag $TH exec h1 -- horovodrun -np 4 -H hvd-h1:2,hvd-h2:2 \
      build-bench/allreduce_bench -s $MH_SIZES -b $BUDGET -l hvd-2x2-$tag
    run hvd-2x2-leader-$tag $TH exec h1 -- env HOROVOD_HIERARCHICAL_STRIPED=0 \
      horovodrun -np 4 -H hvd-h1:2,hvd-h2:2 build-bench/allreduce_bench \
      -s $MH_SIZES -b $BUDGET -l hvd-2x2-leader-$tag
    run hvd-2x2-flat-$tag $TH exec h1 -- env HOROVOD_HIERARCHICAL_ALLREDUCE=0 \
      horovodrun -np 4 -H hvd-h1:2,hvd-h2:2 build-bench/allreduce_bench \
      -s $MH_SIZES -b $BUDGET -l hvd-2x2-flat-$tag
    run hvd-2x2-mac-$tag $TH exec h1 -- horovodrun --data-mac -np 4 \
      -H hvd-h1:2,hvd-h2:2 build-bench/allreduce_bench -s $MH_SIZES \
      -b $BUDGET -l hvd-2x2-mac-$tag
    run ompi-2x2-$tag $TH exec h1 -- mpirun.openmpi -np 4 -H hvd-h1:2,hvd-h2:2 \
      --bind-to none --mca pml ob1 --mca btl tcp,vader,self \
      --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      -x GLIBC_TUNABLES=$TUN "$scratch/mpi_allreduce_ompi" -s $MH_SIZES \
      -b $BUDGET -l ompi-2x2-$tag
    ( for h in 2 1; do
        $TH exec h$h -- env GLOO_SOCKET_IFNAME=eth0 torchrun --nnodes 2 \
          --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint hvd-h1:29411 \
          --rdzv-id "gloo-$tag" benchmarks/torch_gloo_hosts.py \
          --anchors "$scratch" -s $MH_SIZES -b $BUDGET -l torch-gloo-2x2-$tag \
          > "$OUT/torch-gloo-2x2-$tag-h$h.txt" 2>&1 &
      done
      wait )
    grep -ohE 'RESULT,.*' "$OUT/torch-gloo-2x2-$tag-h1.txt" >> "$OUT/results.csv"
  done
  $TH down
  rm -rf "$scratch"
}

# The CPU model too: the machine behind these VMs changes between runs, and
# with it the memory bandwidth every large row depends on.
{ echo "date: $(date -u)"; uname -a; nproc; cat /proc/loadavg; git -C "$REPO" rev-parse HEAD;
  grep -m1 'model name' /proc/cpuinfo
  python -c 'import torch; print("torch", torch.__version__)'
  python -c 'import tensorflow as t, jax, keras; print("tensorflow", t.__version__, "jax", jax.__version__, "keras", keras.__version__)'
  } > "$OUT/env.txt" 2>&1
for s in $SECTIONS; do
  case $s in
    anchors|engine|latency|hosts|frameworks|busy|fusion|autotune|training|clusters|multihost) $s ;;
    python) python_level ;;
    *) echo "unknown section $s"; exit 2 ;;
  esac
done
python "$REPO/benchmarks/report.py" "$OUT" && log "report: $OUT/report.md"
