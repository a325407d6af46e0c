#!/bin/bash
# A DeepSeek-V3-like model in the style of Megatron-LM's example scripts: MLA, 3 dense layers
# then MoE (--moe-layer-freq as a Python list expression), a shared expert, the flex
# dispatcher, an uneven pipeline through --pipeline-model-parallel-layout.
# (hapmoe test fixture; DeepSeek-V3 figures from REFERENCE.md §2.2, 16 layers instead of 61.)
set -euo pipefail

NUM_LAYERS=${NUM_LAYERS:-16}
DENSE=3
PP=4
export NVTE_FUSED_ATTN=1

MLA_ARGS="--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 \
          --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128"

GPT_ARGS=(
  --num-layers ${NUM_LAYERS}
  --hidden-size 7168
  --ffn-hidden-size 18432
  --num-attention-heads 128
  $MLA_ARGS
  --seq-length 4096 --max-position-embeddings 163840
  --position-embedding-type rope --rotary-base 10000
  --normalization RMSNorm --swiglu --disable-bias-linear
  --untie-embeddings-and-output-weights
  --tokenizer-type HuggingFaceTokenizer
  --tokenizer-model deepseek-ai/DeepSeek-V3
)
MOE_ARGS=(
  --num-experts 256
  --moe-router-topk 8
  --moe-ffn-hidden-size 2048
  --moe-shared-expert-intermediate-size 2048
  --moe-layer-freq "([0]*${DENSE}+[1]*$((NUM_LAYERS - DENSE)))"
  --moe-router-score-function sigmoid
  --moe-router-enable-expert-bias
  --moe-router-topk-scaling-factor 2.5
  --moe-router-num-groups 8 --moe-router-group-topk 4
  --moe-token-dispatcher-type=flex --moe-enable-deepep
  --moe-aux-loss-coeff 1e-4
)
PARALLEL_ARGS=(
  --tensor-model-parallel-size 2 --sequence-parallel
  --pipeline-model-parallel-size ${PP}
  --pipeline-model-parallel-layout "Et*3|t*5|t*5|t*3,L"
  --expert-model-parallel-size 8 --expert-tensor-parallel-size 1
  --recompute-granularity full --recompute-method block --recompute-num-layers 2
)
TRAIN_ARGS=(
  --micro-batch-size 1 --global-batch-size 512 --bf16 --use-distributed-optimizer
  --lr 2.2e-4 --train-iters 1000 --mystery-flag 7
)

python -m torch.distributed.run --nnodes 8 --nproc-per-node 8 \
  pretrain_gpt.py "${GPT_ARGS[@]}" "${MOE_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${TRAIN_ARGS[@]}"
