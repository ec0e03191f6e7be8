schedule --table tests/golden/schedule/broken.csv --ranks 2 --micro-batches 1
