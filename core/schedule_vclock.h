/* schedule_vclock.h: the vector clocks of schedule_send_bound's replay (schedule_bound.c)
 * when they are long (many workers take counted messages, as with hundreds of replicas),
 * kept sparse: an immutable, shared, reference-counted dense base (the replicas of a stage
 * share the one their all-reduce made) and the few components above it, sorted. Joins
 * of two bases are cached on the left one, so replicas that meet the same pair of bases
 * share one join: an all-reduce costs O(K) once instead of O(K) per replica, and a
 * message O(its components above its base) instead of O(K). Internal to core/. */
#ifndef PLUMB_CORE_SCHEDULE_VCLOCK_H
#define PLUMB_CORE_SCHEDULE_VCLOCK_H

typedef struct vc_entry {
    int c, v;                /* component, value */
} vc_entry;

typedef struct vclock {
    int base;                /* its base (vcset.b), referenced */
    int n, cap;
    vc_entry *e;             /* [n] components whose value exceeds the base's, by c */
} vclock;

typedef struct vc_base {
    int *v;                  /* [K], or NULL while the slot is free */
    int refs;
    unsigned gen;            /* the slot's generation: one up each time it is freed */
    int cp[4], cr[4];        /* joins cached: with base cp[i] (generation cpg[i]) it gives */
    unsigned cpg[4], crg[4]; /* cr[i] (generation crg[i]); cp -1: none */
    int cnext;
    int next_free;           /* the free list's next slot */
} vc_base;

typedef struct vcset {
    int K;
    vc_base *b;
    int nb, capb;
    int free_head;           /* free slots, reused (-1: none) */
    int *tmp;                /* [K] scratch */
    vc_entry *etmp;          /* scratch of capacity etcap */
    int etcap;
} vcset;

/* Sets up K-component clocks, base 0 all zeros. 0, or -1 out of memory (S is then
 * safe to vc_set_free). */
int vc_set_init(vcset *S, int K);
void vc_set_free(vcset *S);
/* A zero clock (base 0). */
void vc_zero(vcset *S, vclock *c);
/* Releases c's base; c becomes empty (base -1), its entries' buffer kept. */
void vc_drop(vcset *S, vclock *c);
/* vc_drop, and frees the buffer. */
void vc_release(vcset *S, vclock *c);
/* Component k of c. */
int vc_get(const vcset *S, const vclock *c, int k);
/* Raises component k of c to v (v above its value). 0 or -1 (memory). */
int vc_raise(vcset *S, vclock *c, int k, int v);
/* dst (empty or released) becomes a copy of src. 0 or -1. */
int vc_copy(vcset *S, vclock *dst, const vclock *src);
/* into = max(into, from), component by component. 0 or -1. */
int vc_join(vcset *S, vclock *into, const vclock *from);
/* Every clock of cl[0 .. r) becomes their join (the barrier of an all-reduce). 0 or -1. */
int vc_join_all(vcset *S, vclock *const *cl, int r);

#endif
