schedule --kind interleaved --ranks 4 --micro-batches 6 --virtual-stages 2
