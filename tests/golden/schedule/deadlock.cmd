schedule --table tests/golden/schedule/crossed.csv --ranks 2 --micro-batches 2
