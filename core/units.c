/* units.c: byte counts and bandwidths with the unit that reads well, and the cluster file's
 * units against SI units, exactly both ways (core/units.h). */
#include "core/units.h"

#include <math.h>
#include <stdio.h>

char *units_bytes(double bytes, char *buf, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    double v = bytes;
    while (fabs(v) >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(buf, n, i == 0 ? "%.0f %s" : "%.2f %s", v, u[i]);
    return buf;
}

char *units_gbit(double bytes_per_s, char *buf, size_t n)
{
    snprintf(buf, n, "%.3g Gbit/s", bytes_per_s * 8 / 1e9);
    return buf;
}

double units_invert(double target, double (*fwd)(double), double guess)
{
    if (!isfinite(guess) || fwd(guess) == target) return guess;
    double up = guess, down = guess;
    for (int k = 0; k < 8; k++) {
        up = nextafter(up, INFINITY);
        if (fwd(up) == target) return up;
        down = nextafter(down, -INFINITY);
        if (fwd(down) == target) return down;
    }
    return guess;
}

double units_gbit_to_Bps(double g) { return g * 1e9 / 8.0; }
double units_gbyte_to_Bps(double g) { return g * 1e9; }
double units_us_to_s(double us) { return us * 1e-6; }
double units_gib_to_bytes(double g) { return ldexp(g, 30); }
double units_tflops_to_flops(double t) { return t * 1e12; }

double units_Bps_to_gbit(double b) { return units_invert(b, units_gbit_to_Bps, b * 8.0 / 1e9); }
double units_Bps_to_gbyte(double b) { return units_invert(b, units_gbyte_to_Bps, b / 1e9); }
double units_s_to_us(double s) { return units_invert(s, units_us_to_s, s * 1e6); }
double units_bytes_to_gib(double b) { return ldexp(b, -30); }
double units_flops_to_tflops(double f)
{
    return units_invert(f, units_tflops_to_flops, f / 1e12);
}
