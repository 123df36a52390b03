#!/usr/bin/env bash
# Runs one rank of a horovodrun job as if the job spanned several hosts of
# PER_HOST ranks each: rank r claims host "sim<r / PER_HOST>". Ranks of one
# simulated host share memory; hosts talk TCP over loopback.
#   horovodrun -np 4 bash benchmarks/sim_hosts.sh build-bench/allreduce_bench
set -eu
per=${PER_HOST:-2}
export HOROVOD_HOSTNAME="sim$((HOROVOD_RANK / per))"
export HOROVOD_LOCAL_RANK=$((HOROVOD_RANK % per))
export HOROVOD_LOCAL_SIZE=$per
export HOROVOD_BIND_ADDR=127.0.0.1
exec "$@"
