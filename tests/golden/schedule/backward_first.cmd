schedule --table tests/golden/schedule/backward_first.csv --ranks 2 --micro-batches 2
