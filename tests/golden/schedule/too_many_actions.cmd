schedule --ranks 65536 --micro-batches 65536
