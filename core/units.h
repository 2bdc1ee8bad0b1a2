/* units.h: figures as people read them. Byte counts scale to the unit that keeps them
 * readable (B, KiB, MiB, GiB, TiB: a 4.2 MiB peak prints as "4.20 MiB", not "0.00 GiB");
 * bandwidths print in plumb's one convention, Gbit/s (10^9 bits per second), the unit of
 * the cluster file and of every --bandwidth flag. And the cluster file's units against the
 * SI units plumb computes in, both ways, exactly: the way back gives the file value that
 * converts to the very same double (units_invert), so load -> save -> load is lossless. */
#ifndef PLUMB_UNITS_H
#define PLUMB_UNITS_H

#include <stddef.h>

/* "512 B", "4.20 KiB", "12.00 MiB", "1.50 GiB", "2.00 TiB" into buf (n bytes, at least
 * 16 for every value). Returns buf. */
char *units_bytes(double bytes, char *buf, size_t n);

/* bytes/s as "%.3g Gbit/s" (e.g. 1.25e9 B/s: "10 Gbit/s") into buf. Returns buf. */
char *units_gbit(double bytes_per_s, char *buf, size_t n);

/* The x near guess for which fwd(x) == target exactly (searching 8 ulps on either side,
 * up before down); guess itself when none is found (a value no load produced) or when guess
 * is not finite. */
double units_invert(double target, double (*fwd)(double), double guess);

/* File units -> SI: Gbit/s and GB/s -> bytes/s, microseconds -> s, GiB -> bytes,
 * TFLOP/s -> FLOP/s. */
double units_gbit_to_Bps(double g);
double units_gbyte_to_Bps(double g);
double units_us_to_s(double us);
double units_gib_to_bytes(double g);
double units_tflops_to_flops(double t);

/* SI -> file units, each the exact inverse of the above (units_invert). */
double units_Bps_to_gbit(double b);
double units_Bps_to_gbyte(double b);
double units_s_to_us(double s);
double units_bytes_to_gib(double b);
double units_flops_to_tflops(double f);

#endif
