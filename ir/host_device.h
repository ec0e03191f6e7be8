// DSTC_HOST_DEVICE marks a function that runs on the host and, compiled by
// nvcc, on the GPU: the element functions the reference executor and the
// CUDA device share.
#pragma once

#if defined(__CUDACC__)
#define DSTC_HOST_DEVICE __host__ __device__
#else
#define DSTC_HOST_DEVICE
#endif
