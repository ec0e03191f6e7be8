schedule --table tests/golden/schedule/many.csv --ranks 2 --micro-batches 2
