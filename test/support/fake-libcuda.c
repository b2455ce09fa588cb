/* A stand-in for libcuda.so.1 with the driver API's signatures, over host memory, for
   test/cuda-driver-ffi.test.ts: it checks how src/device/cuda/driver.ts marshals through koffi
   (out-params, device pointers as uint64, kernelParams as an array of pointers to each param's
   value). "Device" memory is host memory; the one kernel, "axpb", computes y[i] = a_i * 2 + 1 over
   grid.x * block.x elements; a module is any image whose first byte is 'T'. With
   $TESSERA_FAKE_CUDA_TRACE, every driver call appends its name (a launch: its grid.x) to that file, one a
   line, so a test can read the order of the calls (test/cuda-measure-trace.test.ts). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
static void trace(const char* call, long arg) {
  const char* file = getenv("TESSERA_FAKE_CUDA_TRACE");
  if (!file) return;
  FILE* f = fopen(file, "a");
  if (!f) return;
  if (arg >= 0) fprintf(f, "%s %ld\n", call, arg); else fprintf(f, "%s\n", call);
  fclose(f);
}
#define T(call) trace(call, -1)
static int launches = 0;
CUresult cuGetErrorString(int e, const char** s) { *s = e == 500 ? "CUDA_ERROR_NOT_FOUND" : "fake error"; return 0; }
CUresult cuInit(unsigned f) { return f == 0 ? 0 : 1; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int i) { *d = i; return 0; }
CUresult cuDeviceGetName(char* name, int len, int d) { strncpy(name, "Fake GPU", len); return 0; }
CUresult cuDeviceGetAttribute(int* v, int a, int d) { *v = a == 75 ? 9 : a == 76 ? 0 : a == 16 ? 132 : 0; return 0; }
static int ctx_token = 42;
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { *c = &ctx_token; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { return 0; }
CUresult cuCtxSetCurrent(void* c) { return c == &ctx_token ? 0 : 201; }
CUresult cuCtxSynchronize(void) { T("cuCtxSynchronize"); return 0; }
static int module_token = 7;
/* $TESSERA_FAKE_CUDA_LOAD_MS: a module load that takes that long (a driver call a thread cannot leave: test/tune-cuda-stop.test.ts) */
CUresult cuModuleLoadData(void** m, const void* image) {
  T("cuModuleLoadData");
  const char* slow = getenv("TESSERA_FAKE_CUDA_LOAD_MS");
  if (slow) { struct timespec t = { atoi(slow) / 1000, (atoi(slow) % 1000) * 1000000L }; nanosleep(&t, 0); }
  if (((const char*)image)[0] != 'T') return 218;
  *m = &module_token;
  return 0;
}
CUresult cuModuleUnload(void* m) { T("cuModuleUnload"); return m == &module_token ? 0 : 400; }
static int fn_token = 9;
CUresult cuModuleGetFunction(void** f, void* m, const char* name) { T("cuModuleGetFunction"); if (m != &module_token) return 400; if (strcmp(name, "axpb")) return 500; *f = &fn_token; return 0; }
CUresult cuMemAlloc_v2(uint64_t* p, size_t n) { T("cuMemAlloc"); *p = (uint64_t)(uintptr_t)calloc(n, 1); return *p ? 0 : 2; }
CUresult cuMemFree_v2(uint64_t p) { T("cuMemFree"); free((void*)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(uint64_t d, const void* s, size_t n) { T("cuMemcpyHtoD"); memcpy((void*)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void* d, uint64_t s, size_t n) { T("cuMemcpyDtoH"); memcpy(d, (void*)(uintptr_t)s, n); return 0; }
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  trace("cuLaunchKernel", gx);
  if (f != &fn_token || stream != 0 || extra != 0) return 1;
  float* a = (float*)(uintptr_t)(*(uint64_t*)params[0]);
  float* y = (float*)(uintptr_t)(*(uint64_t*)params[1]);
  for (unsigned i = 0; i < gx * bx; i++) y[i] = a[i] * 2 + 1;
  launches++;
  return 0;
}
CUresult cuEventCreate(void** e, unsigned f) { T("cuEventCreate"); *e = malloc(sizeof(double)); return 0; }
CUresult cuEventRecord(void* e, void* s) { T("cuEventRecord"); struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); *(double*)e = t.tv_sec * 1e3 + t.tv_nsec / 1e6; return 0; }
CUresult cuEventSynchronize(void* e) { T("cuEventSynchronize"); return 0; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) { T("cuEventElapsedTime"); *ms = (float)(*(double*)b - *(double*)a); return 0; }
CUresult cuEventDestroy_v2(void* e) { T("cuEventDestroy"); free(e); return 0; }
int fake_launches(void) { return launches; }
