#!/usr/bin/env bash
# The input pipeline on one NVIDIA GPU, in about 6 minutes (torch, torchvision preinstalled, no network, this
# project copied in; .jpeg carried: Debian's libjpeg62-turbo and its headers unpacked, for the region decoder):
#   1. the region decoder built against that libjpeg-turbo (the loader falls back to PIL's scaled decode without);
#   2. the GPU decode path's tests on CUDA (nvJPEG against the CPU path; ResNet-50 training on GPU-decoded JPEGs);
#   3. a single-rank NCCL training run through the launcher, with a mid-epoch checkpoint (the CUDA path at all);
#   4. ResNet-50 in bf16, channels_last, from photo-sized JPEGs, with the JPEGs decoded by the CPU workers
#      (--decode cpu) and on the GPU (--decode gpu), with 8 loader workers (16 cores, 1 GPU) and with 2 (as 16
#      cores feed 8 GPUs), at 224 px and at 160 px; a table of images/s and input wait per run at the end;
#   5. `bench input` on the host's CPU and nvJPEG at 224 and 160 px, then on copies with restart markers (CPU).
# Results: stdout and $OUT (default benchmarks/results/gpu): gpu_input.txt, each run's metrics, bench JSON.
# SKIP="STEP ..." leaves steps out (e.g. SKIP="r50-224-w8-cpu input-160"). DEVICE=cpu SMALL=1 runs the same
# steps in miniature (to check the script itself; --decode full stands in for gpu).
set -uo pipefail
LOG=gpu_input.txt
source "$(dirname "$0")/gpu_lib.sh"
if [ "${SMALL:-0}" = 1 ]; then
  MODEL=resnet18; SIZES=(32); BATCH=8; PHOTOS=64; EPOCHS=2; WORKERS=(1); COUNT=32; GPU=full; SMOKE_BATCH=16
else
  MODEL=resnet50; SIZES=(224 160); BATCH=256; PHOTOS=4096; EPOCHS=3; WORKERS=(8 2); COUNT=512; GPU=gpu; SMOKE_BATCH=64
fi
versions
if [ -d .jpeg/usr/include ]; then
  LIBDIR=$PWD/.jpeg/usr/lib/x86_64-linux-gnu
  CPPFLAGS="-I$PWD/.jpeg/usr/include -I$PWD/.jpeg/usr/include/x86_64-linux-gnu" \
    LDFLAGS="-L$LIBDIR -Wl,-rpath,$LIBDIR" step region-decoder 120 $PY setup.py -q build_ext --inplace
fi
step region-decoder-loads 30 $PY -c "import ddptrain.data._jpegregion as r; print('region decoder:', r.__file__)"
step gpu-decode-test 150 $PY -m pytest -q -rs -p no:cacheprovider tests/data/test_gpudecode.py
step photos 120 $PY -c "from pathlib import Path; from ddptrain.tools.bench.photos import write_photos; \
write_photos(Path('$TMP/photos'), $PHOTOS, jobs=$(nproc))"
step ddp-smoke 150 $PY -m ddptrain train --data "$TMP/photos" --out "$TMP/smoke" --device "$DEVICE" \
  --model resnet18 --img-size 64 --epochs 2 --batch-size "$SMOKE_BATCH" --save-every-steps 20 --max-restarts 1 --workers 4
for size in "${SIZES[@]}"; do
  for workers in "${WORKERS[@]}"; do
    for decode in cpu "$GPU"; do
      name="r50-$size-w$workers-$decode"
      step "$name" 100 $PY -m ddptrain train --data "$TMP/photos" --out "$TMP/$name" --device "$DEVICE" \
        --model "$MODEL" --img-size "$size" --batch-size "$BATCH" --epochs "$EPOCHS" --val-split 0 --amp bf16 \
        --channels-last --workers "$workers" --decode "$decode" --log-every 5
      [ -f "$TMP/$name/metrics.jsonl" ] && cp "$TMP/$name/metrics.jsonl" "$OUT/$name.jsonl"
    done
  done
done
$PY - "$OUT" <<'PYEOF' | tee -a "$OUT/$LOG"
import json, sys
from pathlib import Path
print("| run | epoch | images/s | input wait |")
print("|---|---|---|---|")
for path in sorted(Path(sys.argv[1]).glob("r50-*.jsonl")):
    epochs = [json.loads(line) for line in path.read_text().splitlines() if '"epoch_time_s"' in line]
    for e in epochs[1:]:  # the first epoch holds cuDNN's autotuning and the workers' start
        print(f"| {path.stem} | {e['epoch'] + 1} | {e['images_per_sec']:.0f} | {e['data_wait_frac']:.0%} |")
PYEOF
for size in "${SIZES[@]}"; do
  mkdir -p "$OUT/input-$size"
  step "input-$size" 150 $PY -m ddptrain bench input --data "$TMP/photos" --count "$COUNT" --rounds 2 \
    --img-size "$size" --device "$DEVICE" --out "$OUT/input-$size"
  mkdir -p "$OUT/input-$size-rst"
  step "input-$size-rst" 150 $PY -m ddptrain bench input --data "$TMP/photos" --count "$COUNT" --rounds 2 \
    --img-size "$size" --device cpu --restart-markers --out "$OUT/input-$size-rst"
done
echo "== done: exit $status; results in $OUT" | tee -a "$OUT/$LOG"
exit $status
