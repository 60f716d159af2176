#!/usr/bin/env bash
# The CUDA paths on a real GPU, in one run of well under 8 minutes. Run from the repository root:
#     OUT=/tmp/out bash bench/gpu_check.sh
# Writes under $OUT: env.txt (GPU, driver, torch), memtruth_new.json (python -m bench.memtruth), streams.json
# (python -m demos.memory.stream_recorder), suite.log and junit.xml (the non-browser tests, on CUDA), steps.log.
# The GPU measurements run first, on an idle GPU; the test suite, whose workers share the GPU, runs last.
# Wheels in .whl/ (the runtime packages that GPU image lacks) are installed into /tmp/site first.
# Without a CUDA GPU each GPU step says so and is left out; the suite still runs. GPU_CHECK_TESTS (default
# "tests") narrows the suite for a trial run of this script; without pytest-xdist it runs in one process.
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0

step() { echo "[gpu_check $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log"; }

if compgen -G ".whl/*.whl" >/dev/null; then
  step "installing $(ls .whl/*.whl | wc -l) wheels into /tmp/site"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { step "wheel install failed"; exit 1; }
else
  step "no .whl folder: using the packages already installed"
fi

python3 - >"$OUT/env.txt" 2>&1 <<'EOF'
import platform, torch
from demos.memory.stream_recorder import driver_version
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
if torch.cuda.is_available():
    print("gpu", torch.cuda.get_device_name(0), "x", torch.cuda.device_count(), "driver", driver_version())
    print("free, total bytes", *torch.cuda.mem_get_info())
else:
    print("no CUDA GPU")
EOF
cat "$OUT/env.txt" | tee -a "$OUT/steps.log"

if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  step "memory model vs the real peak: python -m bench.memtruth"
  timeout 240 python3 -m bench.memtruth --out "$OUT/memtruth_new.json" >"$OUT/memtruth.log" 2>&1
  rc=$?; tail -n 1 "$OUT/memtruth.log" | tee -a "$OUT/steps.log"; step "memtruth exit $rc"; [ $rc -eq 0 ] || status=1

  step "stream recording: python -m demos.memory.stream_recorder"
  timeout 90 python3 -m demos.memory.stream_recorder --out "$OUT/streams.json" 2>&1 | tee -a "$OUT/steps.log"
  rc=${PIPESTATUS[0]}; step "stream recorder exit $rc"; [ $rc -eq 0 ] || status=1
else
  step "no CUDA GPU here: memtruth and stream recording left out (they need one)"
fi

workers=(-n 12)
python3 -c 'import xdist' 2>/dev/null || { workers=(); step "pytest-xdist is not installed: one process"; }
step "non-browser test suite ${workers[*]}"
# shellcheck disable=SC2086  # GPU_CHECK_TESTS may name several paths
timeout 330 python3 -m pytest ${GPU_CHECK_TESTS:-tests} --ignore=tests/browser "${workers[@]}" --timeout 240 -q -rfE \
  -p no:cacheprovider --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/suite.log"
rc=${PIPESTATUS[0]}; step "pytest exit $rc"; [ $rc -eq 0 ] || status=1

step "done, status $status"
exit $status
