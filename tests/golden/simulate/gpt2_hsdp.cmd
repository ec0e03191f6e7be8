compile examples/gpt2_hsdp.dstrat --simulate
