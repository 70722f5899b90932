// cudaStream_t without the CUDA headers, so public headers compile in a build without CUDA.
// This is the CUDA runtime's own definition; repeating a typedef of the same type is legal.
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;  // NOLINT(modernize-use-using): must match CUDA's
