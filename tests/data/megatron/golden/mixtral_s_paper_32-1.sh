#!/bin/bash
# Megatron-LM launcher written by hapmoe 0.1.0 for Megatron-LM core_v0.15.0 (NVIDIA/Megatron-LM tag core_v0.15.0).
# Model: /work/main/tests/data/megatron/mixtral_s.sh (flags read from /work/main/tests/data/megatron/mixtral_s.sh)
# Cluster: paper:32-1
# Plan: PP=2 TP=1 CP=1 EP=4 ETP=1 DP=16, micro-batch 1, global batch 256 (16 micro-batches), 32 processes
# Predicted iteration latency: 7.350 s; throughput 142664 tokens/s; MFU 39.8%
#
#  stage  device    ranks            layers  recompute   memory / capacity        nodes
#      0  910B           0..15           7  none         40.4 GiB / 60.7 GiB      910b-node-000 910b-node-001
#      1  H800          16..31          17  none         76.4 GiB / 79.6 GiB      h800-node-000 h800-node-001
#
# Rank order: Megatron-LM orders ranks tp-cp-ep-dp-pp, so pipeline stage i holds the
# global ranks [i*S, (i+1)*S) with S = TP*CP*DP = 16. torchrun numbers ranks node by node in
# --node-rank order, so NODE_HOSTS lists the nodes in that order: every stage lands on
# nodes of its device type. Node names are placeholders: replace them with your hosts
# (same order, same device types) and run this script once on every node: a node finds its index in
# NODE_HOSTS from its short host name (or set NODE_RANK). Under Slurm, for example:
#   srun --nodes=4 --ntasks-per-node=1 --nodelist=910b-node-000,910b-node-001,h800-node-000,h800-node-001 bash THIS_SCRIPT
#
# What stock Megatron-LM cannot express:
#  - device types: Megatron has no notion of them; the plan's device type per stage is
#    realised only by the rank order above. A job spanning accelerator vendors also needs
#    a collective library that spans them, which stock PyTorch does not provide.
#  - cost-model inputs without a flag: router imbalance 1.2, gamma 1.0.

set -eo pipefail

# Device type of each pipeline stage (read back by hapmoe --megatron-script).
HAPMOE_STAGE_DEVICES=(910B H800)
NODE_HOSTS=(910b-node-000 910b-node-001 h800-node-000 h800-node-001)
NODE_GPUS=(8 8 8 8)
NNODES=4
WORLD_SIZE=32
declare -A NODE_INDEX=([910b-node-000]=0 [910b-node-001]=1 [h800-node-000]=2 [h800-node-001]=3)
NODE_RANK=${NODE_RANK:-${NODE_INDEX[$(hostname -s)]:-${SLURM_NODEID:-0}}}
MASTER_ADDR=${MASTER_ADDR:-910b-node-000}
MASTER_PORT=${MASTER_PORT:-6000}

export CUDA_DEVICE_MAX_CONNECTIONS=1

DISTRIBUTED_ARGS=(
    --nnodes $NNODES
    --node-rank $NODE_RANK
    --nproc-per-node ${NODE_GPUS[$NODE_RANK]}
    --master-addr $MASTER_ADDR
    --master-port $MASTER_PORT
)

# Flags kept from /work/main/tests/data/megatron/mixtral_s.sh (values as the script defines them).
MEGATRON_ARGS=(
    --num-layers 24
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --max-position-embeddings 32768
    --position-embedding-type rope
    --rotary-base 1000000
    --normalization RMSNorm
    --swiglu
    --disable-bias-linear
    --untie-embeddings-and-output-weights
    --vocab-size 31999
    --tokenizer-type NullTokenizer
    --mock-data
    --num-experts 8
    --moe-router-topk 2
    --moe-ffn-hidden-size 14336
    --moe-aux-loss-coeff 1e-2
    --moe-grouped-gemm
    --lr 1e-4
    --train-iters 100
)

# Set by hapmoe from the plan and the training settings.
PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 2
    --context-parallel-size 1
    --expert-model-parallel-size 4
    --expert-tensor-parallel-size 1
    --decoder-first-pipeline-num-layers 7
    --decoder-last-pipeline-num-layers 17
    --micro-batch-size 1
    --global-batch-size 256
    --seq-length 4096
    --bf16
    --use-distributed-optimizer
    --moe-token-dispatcher-type allgather
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py "${MEGATRON_ARGS[@]}" "${PARALLEL_ARGS[@]}"
