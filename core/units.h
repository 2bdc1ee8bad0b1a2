/* units.h: figures as people read them. Byte counts scale to the unit that keeps them
 * readable (B, KiB, MiB, GiB, TiB: a 4.2 MiB peak prints as "4.20 MiB", not "0.00 GiB");
 * bandwidths print in plumb's one convention, Gbit/s (10^9 bits per second), the unit of
 * the cluster file and of every --bandwidth flag. */
#ifndef PLUMB_UNITS_H
#define PLUMB_UNITS_H

#include <stddef.h>

/* "512 B", "4.20 KiB", "12.00 MiB", "1.50 GiB", "2.00 TiB" into buf (n bytes, at least
 * 16 for every value). Returns buf. */
char *units_bytes(double bytes, char *buf, size_t n);

/* bytes/s as "%.3g Gbit/s" (e.g. 1.25e9 B/s: "10 Gbit/s") into buf. Returns buf. */
char *units_gbit(double bytes_per_s, char *buf, size_t n);

#endif
