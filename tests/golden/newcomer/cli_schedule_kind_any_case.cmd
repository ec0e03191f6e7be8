schedule --kind 1F1B --ranks 2 --micro-batches 4
