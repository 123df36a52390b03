#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian bookworm machine
# (run as root), then builds and installs the horovod package.
set -euo pipefail
cd "$(dirname "$0")/.."

# openssh-server and iproute2: the multi-host tests' hosts (tests/multihost);
# slurm-wlm and munge: a Slurm cluster on them.
if ! dpkg -s libgtest-dev openmpi-bin libopenmpi-dev clang-format \
    openssh-server openssh-client iproute2 slurm-wlm munge >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    libgtest-dev openmpi-bin libopenmpi-dev clang-format ninja-build \
    openssh-server openssh-client iproute2 slurm-wlm munge >/dev/null
fi
# torch first and by exact version: an unpinned torch pulls a CUDA build.
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q "nanobind>=2.0" "scikit-build-core>=0.9" cmake ninja \
  scikit-learn tqdm pytest pytest-timeout psutil cloudpickle numpy matplotlib \
  pyyaml
# The frameworks the adapters serve, pinned; the build needs none of them.
python3 -m pip install -q tensorflow-cpu==2.21.0 keras==3.15.1 \
  jax==0.10.2 jaxlib==0.10.2 optax==0.2.8
# Spark and Ray, which horovod.spark and horovod.ray run on (Java 17 for
# Spark's JVMs); pandas below 3, which PySpark 4 warns about.
if ! command -v java >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    openjdk-17-jre-headless >/dev/null
fi
python3 -m pip install -q pyspark==4.3.0 pyarrow==26.0.1 pandas==2.3.3 \
  ray==2.60.0
python3 -m pip install -q .
