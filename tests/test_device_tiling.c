/* test_device_tiling.c: tile and wave quantization of a device's matrix multiplies
 * (core/device.h's device_gemm_waste and device_gemm_s with a gemm_tiling). The waste is
 * checked against tile and wave counts worked out by hand for an H100-like device (132 SMs,
 * 128 x 256 tiles) and the multiply's time against the roofline written out here (the
 * cluster file's "gemm_tiling" object: tests/test_llm.c, device_figures_validated_...). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cluster.h"
#include "core/device.h"

static const device_tiling H100_TILES = {132, 128, 256};

static void near(double got, double want, const char *what)
{
    cr_assert(fabs(got - want) <= 1e-12 * fabs(want), "%s: got %.17g, want %.17g", what, got,
              want);
}

/* Waves and tiles counted by hand: the work run over the work asked. */
Test(device_tiling, waste_by_hand)
{
    /* 4096 x 2048 (a 2048-wide projection of 4096 tokens): 32 x 8 = 256 tiles of 128 x 256,
     * 2 waves of 132: 264 tiles' work for 256 tiles' worth */
    near(device_gemm_waste(&H100_TILES, 1, 4096, 2048), 264.0 / 256, "4096 x 2048");
    /* 4096 x 4608 (a query-key-value shard at hidden 12288, tp 8): 32 x 18 = 576 tiles, 5
     * waves (660 tiles' work); the tile turned round (256 x 128) is 16 x 36, the same */
    near(device_gemm_waste(&H100_TILES, 1, 4096, 4608), 660.0 / 576, "4096 x 4608");
    /* exactly 132 tiles: one full wave, no waste (m = 132 x 128 rows by one tile's width) */
    near(device_gemm_waste(&H100_TILES, 1, 132 * 128, 256), 1, "one full wave");
    /* 133 tiles: a second wave of one tile */
    near(device_gemm_waste(&H100_TILES, 1, 133 * 128, 256), 264.0 / 133, "133 tiles");
    /* tile quantization: 1000 x 1000 ten times over: 8 x 4 = 32 tiles a product either way
     * round, 320 in all, 3 waves of 132 tiles of 32768 elements for 10^7 asked */
    near(device_gemm_waste(&H100_TILES, 10, 1000, 1000), 3.0 * 132 * 32768 / 1e7, "1000^2 x 10");
    /* the better way round: 384 x 8192 is 3 x 32 = 96 tiles of 128 x 256 (under a wave: not
     * taken) or 2 x 64 = 128 of 256 x 128 (under a wave too): no waste counted; at 768 rows
     * 6 x 32 = 192 tiles (2 waves, 264 / 192) against 3 x 64 = 192 (the same) */
    near(device_gemm_waste(&H100_TILES, 1, 384, 8192), 1, "under one wave");
    near(device_gemm_waste(&H100_TILES, 1, 768, 8192), 264.0 / 192, "768 x 8192");
    /* 130 x 33792: 256 x 128 does not fit 130 rows; 128 x 256 is 2 x 132 = 264 tiles, 2 full
     * waves of tiles holding 256 rows of which 130 are asked */
    near(device_gemm_waste(&H100_TILES, 1, 130, 33792), 256.0 / 130, "130 rows");
}

Test(device_tiling, none_without_tiling_or_below_a_tile)
{
    const device_tiling none = {0, 0, 0};
    near(device_gemm_waste(&none, 1, 4096, 4608), 1, "no tiling");
    near(device_gemm_waste(&H100_TILES, 1, 1, 8192), 1, "a matrix-vector product");
    near(device_gemm_waste(&H100_TILES, 1, 100, 100), 1, "one partial tile");
}

/* The multiply's time: the compute side on its FLOPs times the waste, the memory side
 * unchanged, one launch. */
Test(device_tiling, gemm_time_counts_the_waste)
{
    device_type t;
    memset(&t, 0, sizeof t);
    t.peak_flops_prec[DEV_BF16] = 989.4e12;
    t.memory_Bps = 3350e9;
    t.eff = (device_efficiency){0.555, 0.8, 0.8, 5e-6, 0}; /* no gemm_fp8 */
    double m = 4096, n = 4608, k = 12288, f = 2 * m * n * k;
    double plain = device_gemm_s(&t, DEV_BF16, 1, m, n, k, 0);
    near(plain, f / (989.4e12 * 0.555) + 5e-6, "without tiling");
    t.tiling = H100_TILES;
    near(device_gemm_s(&t, DEV_BF16, 1, m, n, k, 0), f * 660 / 576 / (989.4e12 * 0.555) + 5e-6,
         "with tiling");
    near(device_gemm_efficiency(&t, DEV_BF16, 1, m, n, k, 0),
         f / (989.4e12 * (f * 660 / 576 / (989.4e12 * 0.555) + 5e-6)), "efficiency");
    /* a memory-bound product (one row) keeps its bandwidth time */
    double bytes = 2 * (8192 + 8192.0 * 8192 + 8192);
    near(device_gemm_s(&t, DEV_BF16, 1, 1, 8192, 8192, 0), bytes / (3350e9 * 0.8) + 5e-6,
         "matrix-vector");
}
