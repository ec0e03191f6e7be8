schedule --kind 1fb1 --ranks 2 --micro-batches 4
