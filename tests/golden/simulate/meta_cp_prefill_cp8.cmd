compile examples/accuracy/meta_context_parallel_inference.dstrat -D cp=8 -D prompt=131072 --simulate
