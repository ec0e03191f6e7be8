compile examples/gpt2_data_parallel.dstrat -D vocab=9223372036854775807
