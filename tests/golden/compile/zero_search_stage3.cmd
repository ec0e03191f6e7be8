compile examples/zero_search.dstrat --strategy ZeROStage -D stage=3 -D micro=2 -D recompute=true
