schedule --kind interleaved --ranks 2 --micro-batches 4 --virtual-stages 2 --csv
