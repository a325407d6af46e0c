cat <<EOF > "$OUT/config.yaml"
layers: $((4 * 2))
EOF
python - <<'PYEOF' 2>&1 | tee log
print("(")
PYEOF
	cat <<-END
	END
run_cmd="torchrun --nnodes 1 pretrain_gpt.py --num-layers 4 --hidden-size 64
 --num-attention-heads 4 --seq-length 128 --micro-batch-size 1 --global-batch-size 8
 --vocab-size 100 --bf16 --data-path $DATA"
eval ${run_cmd} <<< "here string"
