/* memory.c: the simulator's memory model for one device at its peak (docs/sim.md,
 * "Memory model"): for every stage the device holds, its parameter bytes times the weight
 * versions the schedule keeps (schedule_inflight: 1 for flushing schedules, p - s for
 * PipeDream's stashing, at most 2 for 2BW), one gradient buffer, the optimizer state (sgd 0,
 * momentum 1x, adam 2x the parameters); plus the most activation bytes the engine saw
 * stashed at once on the device (per in-flight microbatch: the stage input and every layer
 * output, or with recompute the stage input, plus one microbatch's recomputed outputs while
 * its backward runs); plus gradient buffers: the backward's two input-gradient buffers
 * (each layer reads the one its successor wrote and writes the other: 2 x the largest
 * layer input) and, per in-flight microbatch, the received output gradient and the input
 * gradient waiting to be sent. */
#include "sim/memory.h"

void sim_memory_of(const sim_model *m, int w, const int *versions, optimizer_kind opt,
                   double peak_act_bytes, int inflight, double capacity, sim_memory *out)
{
    const schedule *s = m->sched;
    double weights = 0, params = 0, buffers = 0;
    for (int st = 0; st < s->nstages; st++)
        for (int j = 0; j < s->replicas[st]; j++)
            if (s->stage_workers[s->stage_first[st] + j] == w) {
                int v = versions && versions[st] > 0 ? versions[st] : 1;
                weights += m->grad_bytes[st] * v;
                params += m->grad_bytes[st];
                buffers += m->gradbuf_bytes[st] + (inflight > 1 ? inflight : 1) *
                                                      m->slotbuf_bytes[st];
                break;
            }
    double optmul = opt == OPT_ADAM ? 2 : opt == OPT_MOMENTUM ? 1 : 0;
    out->weights = weights;
    out->gradients = params;
    out->optimizer = optmul * params;
    out->activations = peak_act_bytes;
    out->buffers = buffers;
    out->total = out->weights + out->gradients + out->optimizer + out->activations + buffers;
    out->capacity = capacity;
    out->fits = out->total <= capacity;
}
