TP=${1:-2}
PP=2
TP_COMM=$(( ($TP > 1) ? 1 : 0 ))
(( N = TP * 4, N++ ))
let "K = N << 1" M=K%3
A=("--num-layers $((N - 1))" "--hidden-size 64" --num-attention-heads 4)
OPTS="--seq-length 128 --micro-batch-size 1 --global-batch-size 8 --vocab-size 100"
torchrun --nproc-per-node 4 pretrain_gpt.py ${A[@]} $OPTS "${A[*]:-x}" \
  --tensor-model-parallel-size $TP --pipeline-model-parallel-size $(( PP ** 1 | 0 )) \
  --bf16 --lr $((1/0)) --save $2
