schedule --table tests/golden/schedule/backward_in_forward_only.csv --ranks 2 --micro-batches 2 --forward-only
