#!/usr/bin/env bash
# The GPU checks of one session on a machine with an NVIDIA GPU, in one go (docs/gpu.md):
#   1. `daskgp doctor --device gpu`: the stack, and one CMVP, gradient and SGLD chain on GPU against CPU;
#   2. benchmarks/gpu_gradient.py: house_8L's gradient on the GPU, on the CPU cores, and GPyTorch's on the GPU.
# Usage: OUT=DIR DASKGP_DATA=DATA bash benchmarks/gpu_session.sh [BUDGET_S]
# Where the machine lacks daskgp's dependencies, wheels in .whl/ are installed first (into /tmp/site, on
# PYTHONPATH; nothing else is touched). Everything it writes goes under $OUT.
set -u
OUT=${OUT:?set OUT to a folder for the reports}
BUDGET=${1:-330}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/nvidia-smi.txt"
python3 -c "import cupy, dask, distributed, dask_cuda; print('cupy', cupy.__version__, 'dask', dask.__version__, \
'dask-cuda', dask_cuda.__version__)"
start=$(date +%s)
timeout 200 python3 -m daskgp doctor --device gpu --json "$OUT/doctor.json" 2>&1 | tee "$OUT/doctor.log"
echo "doctor: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
left=$(( BUDGET - ($(date +%s) - start) ))
timeout $(( left + 30 )) python3 benchmarks/gpu_gradient.py --budget-s "$left" --part-s 150 \
  --out "$OUT/gpu_gradient.json" 2>&1 | tee "$OUT/gpu_gradient.log"
echo "gpu_gradient: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
