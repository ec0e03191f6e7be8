compile examples/gpt_1_5b_proteus.dstrat --strategy ProteusS1
