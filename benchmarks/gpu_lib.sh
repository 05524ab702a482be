# Shared by the GPU check scripts (sourced, not run): the project's sources on PYTHONPATH, $OUT, a scratch folder
# removed at exit, and `step`, which runs one check, logs it to $OUT/$LOG and remembers a failure (SKIP="NAME ..."
# leaves those steps out).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-benchmarks/results/gpu}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
: > "$OUT/$LOG"
step() {  # step NAME TIMEOUT_S COMMAND...: run, log, remember a failure, carry on with the rest
  local name=$1 limit=$2; shift 2
  case " ${SKIP:-} " in *" $name "*) echo "== $name: skipped (SKIP)" | tee -a "$OUT/$LOG"; return;; esac
  echo "== $name ($(date -u +%H:%M:%S))" | tee -a "$OUT/$LOG"
  timeout "$limit" "$@" 2>&1 | tee -a "$OUT/$LOG"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "!! $name failed with exit code $rc" | tee -a "$OUT/$LOG"; status=1; }
}
versions() {
  step versions 60 $PY -c "import torch, torchvision, PIL; print('torch', torch.__version__, 'torchvision', \
torchvision.__version__, 'Pillow', PIL.__version__, 'cuda', torch.version.cuda, [torch.cuda.get_device_name(i) \
for i in range(torch.cuda.device_count())]); import os; print(os.cpu_count(), 'CPUs')"
}
