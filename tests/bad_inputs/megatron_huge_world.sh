#!/bin/bash
# The paper's Mixtral-S (24 layers of Mixtral-8x7B width, 8 experts top-2; hapmoe preset
# mixtral-s) as a Megatron-LM launch script. hapmoe test fixture.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=${SLURM_NNODES:-2}
WORLD_SIZE=$((GPUS_PER_NODE * NNODES))

MODEL_ARGS=(
    --num-layers 8
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention --num-query-groups 8
    --seq-length 4096 --max-position-embeddings 32768
    --position-embedding-type rope --rotary-base 1000000
    --normalization RMSNorm --swiglu --disable-bias-linear
    --untie-embeddings-and-output-weights
    --vocab-size 32000 --tokenizer-type NullTokenizer --mock-data
)
MOE_ARGS=(
    --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 14336
    --moe-token-dispatcher-type allgather
    --moe-aux-loss-coeff 1e-2 --moe-grouped-gemm
)
TRAINING_ARGS=(
    --micro-batch-size 1 --global-batch-size 256 --bf16 --use-distributed-optimizer
    --lr 1e-4 --train-iters 100
)
PARALLEL_ARGS=(
    --tensor-model-parallel-size 2 --sequence-parallel
    --pipeline-model-parallel-size 2
    --expert-model-parallel-size 4
)

torchrun --nproc-per-node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \
    "${MODEL_ARGS[@]}" "${MOE_ARGS[@]}" "${TRAINING_ARGS[@]}" "${PARALLEL_ARGS[@]}"
