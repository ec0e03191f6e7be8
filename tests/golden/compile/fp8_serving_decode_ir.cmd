compile tests/golden/verify/fp8_serving_decode.dstrat --emit ir -D layers=1
