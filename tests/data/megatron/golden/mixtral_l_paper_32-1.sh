#!/bin/bash
# Megatron-LM launcher written by hapmoe 0.1.0 for Megatron-LM core_v0.15.0 (NVIDIA/Megatron-LM tag core_v0.15.0).
# Model: /work/main/tests/data/megatron/mixtral_l.sh (flags read from /work/main/tests/data/megatron/mixtral_l.sh)
# Cluster: paper:32-1
# Plan: PP=4 TP=8 CP=1 EP=8 ETP=1 DP=1, micro-batch 1, global batch 512 (512 micro-batches), 32 processes
# Predicted iteration latency: 78.006 s; throughput 26884 tokens/s; MFU 26.0%
#
#  stage  device    ranks            layers  recompute   memory / capacity        nodes
#      0  910B           0..7           10  selective    60.0 GiB / 60.7 GiB      910b-node-000
#      1  910B           8..15          10  selective    58.3 GiB / 60.7 GiB      910b-node-001
#      2  H800          16..23          14  selective    79.0 GiB / 79.6 GiB      h800-node-000
#      3  H800          24..31          14  selective    77.7 GiB / 79.6 GiB      h800-node-001
#
# Rank order: Megatron-LM orders ranks tp-cp-ep-dp-pp, so pipeline stage i holds the
# global ranks [i*S, (i+1)*S) with S = TP*CP*DP = 8. torchrun numbers ranks node by node in
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
HAPMOE_STAGE_DEVICES=(910B 910B H800 H800)
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

# Flags kept from /work/main/tests/data/megatron/mixtral_l.sh (values as the script defines them).
MEGATRON_ARGS=(
    --num-layers 48
    --hidden-size 6144
    --ffn-hidden-size 16384
    --num-attention-heads 48
    --group-query-attention
    --num-query-groups 8
    --max-position-embeddings 65536
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
    --moe-ffn-hidden-size 16384
    --moe-aux-loss-coeff 1e-2
    --moe-grouped-gemm
    --lr 1e-4
    --train-iters 100
)

# Set by hapmoe from the plan and the training settings.
PARALLEL_ARGS=(
    --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 4
    --context-parallel-size 1
    --expert-model-parallel-size 8
    --expert-tensor-parallel-size 1
    --sequence-parallel
    --pipeline-model-parallel-layout 'E,t*10|t*10|t*14|t*14,L'
    --recompute-granularity selective
    --recompute-modules core_attn moe_act
    --micro-batch-size 1
    --global-batch-size 512
    --seq-length 4096
    --bf16
    --use-distributed-optimizer
    --moe-token-dispatcher-type alltoall
)

torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py "${MEGATRON_ARGS[@]}" "${PARALLEL_ARGS[@]}"
