schedule --kind zb_2p --ranks 4 --micro-batches 8
