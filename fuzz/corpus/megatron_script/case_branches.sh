# case statements: a known word, globs, quoted patterns, ;& and ;;&, an
# unknown word (every branch read) and a default (the other branches kept
# for the launcher).
MODEL_SIZE=${1:-A3B}
case $MODEL_SIZE in
  A3B|a3b) NUM_LAYERS=48 ;;
  [0-9]*B) NUM_LAYERS=64 ;&
  "*") HIDDEN=5120 ;;&
  (*) : ;;
esac
case "$(hostname)" in n1) EXTRA=(--n1) ;; *) EXTRA=(--other) ;; esac
case ${PR:-bf16} in fp16) P=(--fp16) ;; bf16) P=(--bf16) ;; esac
torchrun pretrain_gpt.py --num-layers $NUM_LAYERS --hidden-size 1024 \
  --num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 \
  --micro-batch-size 1 --global-batch-size 16 --vocab-size 32000 \
  --tokenizer-type NullTokenizer "${P[@]}" ${EXTRA[@]}
