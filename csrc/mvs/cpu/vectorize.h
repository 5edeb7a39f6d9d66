/* Kernel loops are written without branches or calls so that the compiler
 * vectorises them; on x86-64 Linux each such function also gets AVX-512
 * and AVX2 clones, picked at load time by the CPU it runs on. -std=c11
 * keeps floating-point contraction off, so every clone gives the same
 * bits. GCC 12 vectorises only the default clone of a static function:
 * cloned functions have external linkage (hidden by -fvisibility=hidden).
 */
#ifndef AP_VECTORIZE_H
#define AP_VECTORIZE_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    defined(__linux__)
#define AP_VECTOR_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3",      \
                                 "default")))
#define AP_CLONES 1
#else
#define AP_VECTOR_CLONES
#define AP_CLONES 0
#endif

/* Two neighbouring floats (texels, table entries) in one 8-byte load:
 * the vectorised loops load their lookups one lane at a time, and in
 * pairs that takes half the loads. */
static inline void
float_pair(const float *p, double *first, double *second)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t bits;
    memcpy(&bits, p, sizeof(bits));
    uint32_t lo = (uint32_t)bits, hi = (uint32_t)(bits >> 32);
    float a, b;
    memcpy(&a, &lo, sizeof(a));
    memcpy(&b, &hi, sizeof(b));
    *first = a;
    *second = b;
#else
    *first = p[0];
    *second = p[1];
#endif
}

#endif
