#!/bin/bash
# A launch script in the style of Pai-Megatron-Patch's run_mcore_*.sh
# (written for hapmoe's tests; nothing is copied from Pai-Megatron-Patch),
# run as  pai_style_run_mcore.sh ENV MODEL_SIZE BATCH GBS LR PR TP PP EP SEQ AC SAVE
# (hapmoe --megatron-script-args "dsw A3B 1 64 1e-5 bf16 2 2 4 4096 sel /save").
# The constructs it reproduces:
#   - positional arguments with defaults: MODEL_SIZE=${2:-A3B}, LR=$5;
#   - case on the model size (case $MODEL_SIZE in A3B) ...;; 30B) ...;; *) exit;; esac)
#     and on the precision (case "${PR}" in fp16) ...;; bf16) ...;; esac);
#   - ternary arithmetic: $(( ($TP > 1) ? 1 : 0 )), $(( (EP > 1) ? 1 : TP ));
#   - tests of variables nothing sets: if [ -z ${MP_VP} ] (Pai's virtual pipeline option),
#     if [ -z ${PRETRAIN_CHECKPOINT_PATH} ] (its --load option);
#   - flags built in strings and arrays, the command in a string run with eval ${run_cmd}.
set -e
ENV=${1:-dsw}
CURRENT_DIR="$( cd "$( dirname "$0" )" && pwd )"
export CUDA_DEVICE_MAX_CONNECTIONS=1

if [ $ENV = dsw ]; then
    MASTER_ADDR=localhost
    MASTER_PORT=$(shuf -n 1 -i 10000-65535)
    NNODES=1
    NODE_RANK=0
    GPUS_PER_NODE=8
elif [ $ENV = dlc ]; then
    NNODES=${WORLD_SIZE}
    NODE_RANK=${RANK}
    GPUS_PER_NODE=${KUBERNETES_CONTAINER_RESOURCE_GPU}
fi
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK \
    --master_addr $MASTER_ADDR --master_port $MASTER_PORT"

MODEL_SIZE=${2:-A3B}
BATCH_SIZE=${3:-1}
GLOBAL_BATCH_SIZE=${4:-64}
LR=$5
PR=${6:-bf16}
TP=${7:-2}
PP=${8:-2}
EP=${9:-4}
SEQ_LEN=${10:-4096}
AC=${11:-sel}
SAVE_PATH=${12:-/tmp/save}

case $MODEL_SIZE in
  A3B|a3b)
    NUM_LAYERS=8
    HIDDEN_SIZE=1024
    NUM_ATTN_HEADS=16
    NUM_KV_HEADS=4
    INTERMEDIATE_SIZE=4096
    MOE_INTERMEDIATE_SIZE=512
    NUM_EXPERTS=16
    ROUTER_TOPK=4
    ;;
  30B)
    NUM_LAYERS=12
    HIDDEN_SIZE=2048
    NUM_ATTN_HEADS=32
    NUM_KV_HEADS=4
    INTERMEDIATE_SIZE=6144
    MOE_INTERMEDIATE_SIZE=768
    NUM_EXPERTS=32
    ROUTER_TOPK=8
    ;;
  *)
    echo "unknown MODEL_SIZE ${MODEL_SIZE}"
    exit 1
    ;;
esac

case "${PR}" in
  fp16)
    pr_options="--fp16 --apply-query-key-layer-scaling"
    export NVTE_APPLY_QK_LAYER_SCALING=1
    ;;
  bf16)
    pr_options="--bf16"
    ;;
esac

# Expert TP 1 with expert parallelism, else TP; SP exactly when TP > 1.
ETP=$(( (EP > 1) ? 1 : TP ))
if [ $(( ($TP > 1) ? 1 : 0 )) = 1 ]; then
    sp_options="--sequence-parallel"
else
    sp_options=""
fi

if [ -z ${PRETRAIN_CHECKPOINT_PATH} ]; then
    load_options=""
else
    load_options="--load ${PRETRAIN_CHECKPOINT_PATH}"
fi

if [ -z ${MP_VP} ]; then
    vp_options=""
else
    vp_options="--num-layers-per-virtual-pipeline-stage ${MP_VP}"
fi

case $AC in
  full) ac_options="--recompute-method uniform --recompute-num-layers 1 --recompute-granularity full" ;;
  sel)  ac_options="--recompute-activations" ;;
  none) ac_options="" ;;
esac

moe_options=(
    --num-experts ${NUM_EXPERTS}
    --moe-router-topk ${ROUTER_TOPK}
    --moe-ffn-hidden-size ${MOE_INTERMEDIATE_SIZE}
    --expert-model-parallel-size ${EP}
    --expert-tensor-parallel-size ${ETP}
    --moe-grouped-gemm
    --moe-token-dispatcher-type alltoall
)

megatron_options="  \
        --save ${SAVE_PATH} \
        --lr ${LR} \
        --micro-batch-size ${BATCH_SIZE} \
        --global-batch-size ${GLOBAL_BATCH_SIZE} \
        --num-layers ${NUM_LAYERS} \
        --hidden-size ${HIDDEN_SIZE} \
        --num-attention-heads ${NUM_ATTN_HEADS} \
        --group-query-attention \
        --num-query-groups ${NUM_KV_HEADS} \
        --ffn-hidden-size ${INTERMEDIATE_SIZE} \
        --seq-length ${SEQ_LEN} \
        --max-position-embeddings ${SEQ_LEN} \
        --max-padding-length ${SEQ_LEN} \
        --tensor-model-parallel-size ${TP} \
        --pipeline-model-parallel-size ${PP} \
        --swiglu \
        --normalization RMSNorm \
        --position-embedding-type rope \
        --disable-bias-linear \
        --untie-embeddings-and-output-weights \
        --use-distributed-optimizer \
        --patch-tokenizer-type Qwen3Tokenizer \
        --extra-vocab-size 293"

run_cmd="torchrun $DISTRIBUTED_ARGS pretrain_qwen.py
 ${megatron_options} ${pr_options} ${sp_options} ${vp_options} ${load_options} ${ac_options} \
 ${moe_options[@]}"

echo ${run_cmd}
eval ${run_cmd}
