schedule --kind dualpipe_v --ranks 4 --micro-batches 8
