// The device and its memory for the CUDA trainer (cuda_api.h): CUDA runtime
// calls turned into par_status errors. Host code only; the kernels are in
// cuda_kernels.cu. Tests: tests/gpu/test_cuda.c (needs a device).
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_api.h"

// An error of the runtime, as a par_status with its text.
#define CUDA_TRY(call, what)                                                                   \
    do {                                                                                       \
        const cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess)                                                                 \
            return par_set_error(e_ == cudaErrorMemoryAllocation ? PAR_ERR_ALLOC               \
                                                                 : PAR_ERR_CONFIG,             \
                                 __FILE__, __LINE__, "CUDA %s: %s", what,                      \
                                 cudaGetErrorString(e_));                                      \
    } while (0)

par_status par_cuda_open(int index, char *name, size_t cap)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    PAR_FAIL_IF(e != cudaSuccess || n == 0, PAR_ERR_CONFIG,
                "--trainer cuda: no CUDA device (%s)",
                e != cudaSuccess ? cudaGetErrorString(e) : "none visible");
    const int dev = (index < 0 ? 0 : index) % n;
    CUDA_TRY(cudaSetDevice(dev), "setting the device");
    cudaDeviceProp p;
    CUDA_TRY(cudaGetDeviceProperties(&p, dev), "device properties");
    if (name && cap) snprintf(name, cap, "%s", p.name);
    return PAR_OK;
}

par_status par_cuda_alloc(void **p, size_t bytes)
{
    *p = NULL;
    CUDA_TRY(cudaMalloc(p, bytes ? bytes : 1), "allocation");
    CUDA_TRY(cudaMemset(*p, 0, bytes ? bytes : 1), "memset");
    return PAR_OK;
}

void par_cuda_free(void *p)
{
    if (p) cudaFree(p);
}

par_status par_cuda_host_alloc(void **p, size_t bytes)
{
    *p = NULL;
    CUDA_TRY(cudaMallocHost(p, bytes ? bytes : 1), "page-locked allocation");
    return PAR_OK;
}

void par_cuda_host_free(void *p)
{
    if (p) cudaFreeHost(p);
}

par_status par_cuda_put(void *dst, const void *src, size_t bytes)
{
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, 0), "copy to the device");
    return PAR_OK;
}

par_status par_cuda_get(void *dst, const void *src, size_t bytes)
{
    CUDA_TRY(cudaGetLastError(), "kernel launch");
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy from the device");
    return PAR_OK;
}

par_status par_cuda_sync(void)
{
    CUDA_TRY(cudaGetLastError(), "kernel launch");
    CUDA_TRY(cudaDeviceSynchronize(), "kernels");
    return PAR_OK;
}
