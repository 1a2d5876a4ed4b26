// Fixed-width types and the host/device qualifier shared by the compiler and the VM.
// The same headers compile with g++ (CPU backend), nvcc, and NVRTC (no system headers).
#pragma once

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define VG_HD __host__ __device__
#else
#define VG_HD
#endif

#define VG_INT32_MIN (-2147483647 - 1)
#define VG_INT32_MAX 2147483647
