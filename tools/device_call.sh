#!/bin/bash
# The helper behind the GPU runs in docs/measurements.md, run on the lent H200 through the device tool:
#   bash tools/device_call.sh SHA STEP...   (SHA: the commit the copied tree is; the device copy's git history is
#   not this checkout's, so the run records it through GPUATLAS_GIT_SHA)
# STEP: quick | timedquick | full | gputest | raypart1 | rayinstall | any shell command. Each step's output goes
# to $OUT/log-<step>.txt, every line stamped with the epoch time; /tmp/runs is tarred into $OUT/runs.tgz.
# Carried (git-ignored): .whl/numpy-2.3.5-*.whl (numba-cuda needs numpy < 2.5), and for Ray, which is over the
# carry limit, .ray1/ray.partaa in one call and .ray2/ray.partab with Ray's missing dependencies' wheels in the
# next (split -b 40M of ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl).
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
ls .whl/numpy-*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/numpy-*.whl
export PYTHONPATH=$PWD:/tmp/site
echo "setup $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=uuid,name,driver_version,serial,pci.bus_id,clocks.max.sm,power.limit --format=csv > "$OUT/board.txt"
cat "$OUT/board.txt"
stamp() { python3 -u -c 'import sys,time
for l in sys.stdin: print(f"{time.time():.6f} {l}", end="", flush=True)'; }
sha=$1; shift; export GPUATLAS_GIT_SHA=$sha
for step in "$@"; do
  case $step in
    quick) cmd="python3 -m gpuatlas run --profile quick --out /tmp/runs" ;;
    timedquick) cmd="python3 tools/run_phases.py run --profile quick --out /tmp/runs" ;;
    full) cmd="python3 -m gpuatlas run --profile full --out /tmp/runs" ;;
    gputest) cmd="python3 -m pytest -q -m gpu -p no:cacheprovider" ;;
    raypart1) cmd="cp .ray1/ray.partaa /tmp/" ;;
    rayinstall) cmd="cat /tmp/ray.partaa .ray2/ray.partab > /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl && sha256sum /tmp/ray-*.whl && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/ray-*.whl .ray2/*.whl && python3 -c 'import ray; print(ray.__version__)'" ;;
    *) cmd="$step" ;;
  esac
  s=$(date +%s)
  { echo "\$ $cmd"; echo "# $(date -u +%FT%TZ) sha $sha"; cat "$OUT/board.txt"; } | stamp > "$OUT/log-$(echo $step | tr -c 'a-z0-9\n' _ | cut -c1-40).txt"
  ( time bash -c "$cmd" ) 2>&1 | stamp >> "$OUT/log-$(echo $step | tr -c 'a-z0-9\n' _ | cut -c1-40).txt"
  echo "$step: $(( $(date +%s) - s )) s"
done
[ -d /tmp/runs ] && tar czf "$OUT/runs.tgz" -C /tmp runs
echo "total $(( $(date +%s) - t0 )) s"
