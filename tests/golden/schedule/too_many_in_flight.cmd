schedule --table tests/golden/schedule/too_many_in_flight.csv --ranks 2 --micro-batches 2 --max-ongoing 1
