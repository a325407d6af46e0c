#!/bin/bash
# A T5 220M pretraining script in the style of Megatron-LM's
# examples/t5/train_t5_220m_distributed.sh: pretrain_t5.py trains an
# encoder-decoder model, which hapmoe refuses. hapmoe test fixture.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NUM_NODES=1
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES --master_addr localhost --master_port 6000"

T5_ARGS="
    --encoder-num-layers 12 \
    --decoder-num-layers 12 \
    --hidden-size 768 \
    --num-attention-heads 12 \
    --kv-channels 64 \
    --ffn-hidden-size 3072 \
    --encoder-seq-length 512 \
    --decoder-seq-length 128 \
    --max-position-embeddings 512 \
    --micro-batch-size 64 \
    --global-batch-size 512 \
    --lr 0.0001 \
    --train-iters 1000000 \
    --bf16 \
    --vocab-extra-ids 100 \
    --tensor-model-parallel-size 1 \
    --pipeline-model-parallel-size 1
"

torchrun $DISTRIBUTED_ARGS pretrain_t5.py \
    $T5_ARGS \
    --vocab-file $VOCAB_FILE \
    --save $CHECKPOINT_PATH
