schedule --table tests/golden/schedule/user_1f1b.csv --ranks 2 --micro-batches 2
