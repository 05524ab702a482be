#!/usr/bin/env bash
# Every GPU check in one run on one NVIDIA GPU (torch, torchvision, timm preinstalled, no network, this project
# copied in). On an H200 it takes more than 10 minutes (steps 1, 2, 4's validation, 6, the FSDP run and
# --batch-size auto alone took 7): where calls are limited, run it in parts with SKIP (gpu_lib.sh):
#   1. a single-rank NCCL DDP training run through the launcher (torchrun), with a mid-epoch checkpoint;
#   2. `ddptrain doctor` (versions, GPU, NCCL smoke test);
#   3. precision on synthetic input: ResNet-50, 224 px, fp32 / bf16 / fp16, +/- channels_last, + compile;
#   4. the same model trained from real JPEGs (bf16, channels_last) to compare with 3, with the JPEGs decoded by
#      the CPU workers and then on the GPU (--decode gpu), a ResNet-18 validated and evaluated with the eval crop on
#      the GPU (and the same checkpoint evaluated with CPU decoding), and the GPU decode path's tests;
#   5. the input benchmark on the GPU, with nvJPEG decoding;
#   6. the ViT fine-tuning recipe (configs/vit-small-finetune.yaml: layer decay, RandAugment, Mixup/CutMix, EMA)
#      on the generated shapes, bf16, from random weights (no network here); channels_last does not apply to a ViT;
#   7. large models: `bench memory` for ViT-B/16 and ViT-L/16 under ddp / fsdp / fsdp+gc (per-process memory and
#      throughput), an FSDP training run (bf16, gradient checkpointing, a mid-epoch checkpoint folder) evaluated from
#      its sharded checkpoint, and `--batch-size auto` finding the largest ResNet-50 batch.
# Results go to stdout and to $OUT (default benchmarks/results/gpu): gpu_check.txt plus each bench's
# JSON and PNG. DEVICE=cpu SMALL=1 runs the same steps in miniature (to check the script itself).
set -uo pipefail
LOG=gpu_check.txt
source "$(dirname "$0")/gpu_lib.sh"
if [ "${SMALL:-0}" = 1 ]; then
  MODEL=resnet18; SIZE=32; BATCH=8; STEPS=3; PHOTOS=64; EPOCHS=1; COMPILE=""; VIT=(--img-size 32 --batch-size 8)
  LARGE=(timm:test_vit timm:test_vit); LARGE_BATCH=(4 4); AUTO=(--batch-size 8)
else
  MODEL=resnet50; SIZE=224; BATCH=256; STEPS=40; PHOTOS=3072; EPOCHS=2; COMPILE="--compile"; VIT=(--batch-size 64)
  LARGE=(timm:vit_base_patch16_224 timm:vit_large_patch16_224); LARGE_BATCH=(64 32); AUTO=(--batch-size auto)
fi
versions
step make-data 120 $PY -m ddptrain make-dataset --out "$TMP/shapes" --classes 5 --per-class 64
step ddp-smoke 150 $PY -m ddptrain train --data "$TMP/shapes" --out "$TMP/smoke" --device "$DEVICE" \
  --model resnet18 --img-size 64 --epochs 2 --batch-size 32 --save-every-steps 3 --max-restarts 1 --workers 4
step doctor 120 $PY -m ddptrain doctor --nproc 1 --device "$DEVICE"
step precision-synthetic 240 $PY -m ddptrain bench precision --synthetic --model "$MODEL" --img-size "$SIZE" \
  --batch-size "$BATCH" --steps "$STEPS" --device "$DEVICE" $COMPILE --out "$OUT"
step photos 120 $PY -c "from pathlib import Path; from ddptrain.tools.bench.photos import write_photos; \
write_photos(Path('$TMP/photos'), $PHOTOS, jobs=$(nproc))"
step real-jpeg-training 200 $PY -m ddptrain train --data "$TMP/photos" --out "$TMP/real" --device "$DEVICE" \
  --model "$MODEL" --img-size "$SIZE" --batch-size "$BATCH" --epochs "$EPOCHS" --val-split 0 --amp bf16 \
  --channels-last --workers "$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))" --log-every 5
[ -f "$TMP/real/metrics.jsonl" ] && cp "$TMP/real/metrics.jsonl" "$OUT/real-jpeg-metrics.jsonl"
# the same with the JPEGs decoded on the GPU (nvJPEG) instead of by the CPU workers: compare images/s in the logs
GPU_DECODE=(--decode gpu); [ "$DEVICE" = cuda ] || GPU_DECODE=(--decode full)
step real-jpeg-gpu-decode 200 $PY -m ddptrain train --data "$TMP/photos" --out "$TMP/real-gpu" --device "$DEVICE" \
  --model "$MODEL" --img-size "$SIZE" --batch-size "$BATCH" --epochs "$EPOCHS" --val-split 0 --amp bf16 \
  --channels-last --workers "$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))" --log-every 5 "${GPU_DECODE[@]}"
[ -f "$TMP/real-gpu/metrics.jsonl" ] && cp "$TMP/real-gpu/metrics.jsonl" "$OUT/real-jpeg-gpu-decode-metrics.jsonl"
# validation and `ddptrain eval` with the eval crop on the device: the same checkpoint scored by both decoders
step gpu-decode-validation 150 $PY -m ddptrain train --data "$TMP/photos" --out "$TMP/val-gpu" --device "$DEVICE" \
  --model resnet18 --img-size "$SIZE" --batch-size "$BATCH" --epochs 2 --val-split 0.2 --amp bf16 --channels-last \
  --workers 2 "${GPU_DECODE[@]}"
[ -f "$TMP/val-gpu/metrics.jsonl" ] && cp "$TMP/val-gpu/metrics.jsonl" "$OUT/gpu-decode-validation-metrics.jsonl"
for decode in "${GPU_DECODE[1]}" cpu; do
  step "eval-decode-$decode" 90 $PY -m ddptrain eval --checkpoint "$TMP/val-gpu/checkpoints/best.pt" \
    --data "$TMP/photos" --device "$DEVICE" --decode "$decode"
done
step gpu-decode-test 120 $PY -m pytest -q tests/data/test_gpudecode.py -p no:cacheprovider
step input 150 $PY -m ddptrain bench input --data "$TMP/photos" --count 512 --rounds 2 --device "$DEVICE" --out "$OUT"
step vit-recipe 240 $PY -m ddptrain train --config configs/vit-small-finetune.yaml --no-pretrained \
  --data "$TMP/shapes" --out "$TMP/vit" --device "$DEVICE" --epochs 3 --amp bf16 "${VIT[@]}" --workers 4
[ -f "$TMP/vit/metrics.jsonl" ] && cp "$TMP/vit/metrics.jsonl" "$OUT/vit-recipe-metrics.jsonl"
for i in 0 1; do
  step "memory-${LARGE[$i]}" 240 $PY -m ddptrain bench memory --model "${LARGE[$i]}" --img-size "$SIZE" \
    --batch-size "${LARGE_BATCH[$i]}" --nproc 1 --steps 5 --device "$DEVICE" --out "$OUT/memory-$i"
done
step fsdp-training 200 $PY -m ddptrain train --data "$TMP/shapes" --out "$TMP/fsdp" --device "$DEVICE" \
  --model "${LARGE[0]}" --img-size "$SIZE" --batch-size 32 --epochs 2 --amp bf16 --strategy fsdp \
  --grad-checkpointing --save-every-steps 4 --workers 4
[ "$DEVICE" = cuda ] && step fsdp-compile 240 $PY -m ddptrain train --data "$TMP/shapes" --out "$TMP/fsdp-compile" --device "$DEVICE" \
  --model "${LARGE[0]}" --img-size "$SIZE" --batch-size 32 --epochs 1 --amp bf16 --strategy fsdp --compile --workers 4
step fsdp-eval 120 $PY -m ddptrain eval --checkpoint "$TMP/fsdp/checkpoints/best.dcp" --data "$TMP/shapes" \
  --device "$DEVICE"
[ -f "$TMP/fsdp/best_eval.json" ] && cp "$TMP/fsdp/best_eval.json" "$OUT/fsdp-best_eval.json"
step batch-size-auto 200 $PY -m ddptrain train --data "$TMP/photos" --out "$TMP/auto" --device "$DEVICE" \
  --model "$MODEL" --img-size "$SIZE" "${AUTO[@]}" --epochs 1 --val-split 0 --amp bf16 --channels-last \
  --workers "$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))" --log-every 5
[ -f "$TMP/auto/config.yaml" ] && grep -E "^ *batch_size" "$TMP/auto/config.yaml" | tee -a "$OUT/gpu_check.txt"
echo "== done: exit $status; results in $OUT" | tee -a "$OUT/gpu_check.txt"
exit $status
