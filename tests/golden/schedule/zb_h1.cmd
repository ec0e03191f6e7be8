schedule --kind zb_h1 --ranks 4 --micro-batches 6
