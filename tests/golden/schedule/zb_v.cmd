schedule --kind zb_v --ranks 4 --micro-batches 8
