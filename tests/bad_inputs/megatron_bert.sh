#!/bin/bash
# A BERT-large pretraining script in the style of Megatron-LM's
# examples/bert/train_bert_340m_distributed.sh: pretrain_bert.py trains an
# encoder, which hapmoe refuses. hapmoe test fixture.

export CUDA_DEVICE_MAX_CONNECTIONS=1

MEGATRON=/workspace/megatron-lm
BERT_MODEL_ARGS=(
    --num-layers 24
    --hidden-size 1024
    --num-attention-heads 16
    --seq-length 512
    --max-position-embeddings 512
    --attention-backend auto
)
TRAINING_ARGS=(
    --micro-batch-size 4 --global-batch-size 32 --train-iters 1000000 --fp16 --lr 0.0001
)

python -m torch.distributed.run --nproc-per-node 8 --nnodes 1 "$MEGATRON/pretrain_bert.py" \
    "${BERT_MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" --vocab-file "$VOCAB_FILE"
