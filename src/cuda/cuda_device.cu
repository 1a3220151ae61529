// The device and its memory for the CUDA trainer (cuda_api.h): CUDA runtime
// calls turned into par_status errors. Host code only; the kernels are in
// cuda_kernels.cu. Tests: tests/gpu/test_cuda.c (needs a device).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// PARITY_CUDA_PROFILE: labels, their calls, seconds and flops.
enum { PROF_MAX = 96 };
static struct {
    cudaEvent_t t0, t1;
    int n;
    char label[PROF_MAX][64];
    long calls[PROF_MAX];
    double ms[PROF_MAX], flops[PROF_MAX];
} prof;
static int prof_on = -1;   // -1: PARITY_CUDA_PROFILE not read yet

static void prof_print(void)
{
    fprintf(stderr, "%-40s %8s %10s %10s %9s\n", "cuda profile: label", "calls", "ms",
            "us/call", "TFLOP/s");
    for (int i = 0; i < prof.n; i++)
        fprintf(stderr, "%-40s %8ld %10.2f %10.1f %9.3f\n", prof.label[i], prof.calls[i],
                prof.ms[i], 1e3 * prof.ms[i] / (double)prof.calls[i],
                prof.flops[i] > 0 ? prof.flops[i] / (prof.ms[i] * 1e9) : 0.0);
}

int par_cuda_prof_begin(void)
{
    if (prof_on < 0) {
        const char *e = getenv("PARITY_CUDA_PROFILE");
        prof_on = e && e[0] && strcmp(e, "0") != 0 &&
                  cudaEventCreate(&prof.t0) == cudaSuccess &&
                  cudaEventCreate(&prof.t1) == cudaSuccess;
        if (prof_on) atexit(prof_print);
    }
    if (prof_on) cudaEventRecord(prof.t0, 0);
    return prof_on;
}

void par_cuda_prof_end(const char *label, double flops)
{
    if (prof_on <= 0) return;
    cudaEventRecord(prof.t1, 0);
    cudaEventSynchronize(prof.t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, prof.t0, prof.t1);
    int i = 0;
    while (i < prof.n && strcmp(prof.label[i], label) != 0) i++;
    if (i == PROF_MAX) return;
    if (i == prof.n) snprintf(prof.label[prof.n++], sizeof prof.label[0], "%s", label);
    prof.calls[i]++;
    prof.ms[i] += ms;
    prof.flops[i] += flops;
}
