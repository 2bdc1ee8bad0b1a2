/* cuemu_cudnn.cc: cuemu's cuDNN: handles, NCHW tensor, filter and 2-D convolution
 * descriptors, cudnnFind* for the three convolution directions, and the convolutions
 * themselves (forward, backward data, backward filter) computed on the CPU in stream order.
 *
 * Two algorithms stand in for cuDNN's many in each direction: algorithm 0 (IMPLICIT_GEMM,
 * BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0) runs on FMA units, without workspace, on fp32 tensors
 * only; algorithm 1 (IMPLICIT_PRECOMP_GEMM, BWD_DATA_ALGO_1, BWD_FILTER_ALGO_1) runs on
 * tensor cores and needs a workspace of 4 bytes per output element: on fp32 tensors its
 * inputs are rounded to TF32 unless the descriptor's math type is CUDNN_FMA_MATH; on bf16
 * tensors it is the only algorithm. Both accumulate in fp32, in a fixed order.
 *
 * Bad descriptors and arguments return cuDNN's statuses; memory the GPU would fault on
 * (host pointers, freed buffers, a workspace or output that overlaps another operand) stops
 * the run with cuemu::fail. Scaling factors alpha and beta are host floats. */
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "cuemu.h"

/* The opaque types of <cudnn_graph.h>, <cudnn_ops.h> and <cudnn_cnn.h>. */
struct cudnnContext {
    int device;           /* the current device at cudnnCreate */
    cudaStream_t stream;  /* NULL until cudnnSetStream */
};

struct cudnnTensorStruct {
    bool set;             /* cudnnSetTensor4dDescriptor succeeded on it */
    cudnnDataType_t type;
    int n, c, h, w;       /* NCHW, fully packed */
};

struct cudnnFilterStruct {
    bool set;
    cudnnDataType_t type;
    int k, c, r, s;       /* output channels, input channels, rows, columns (KCRS packed) */
};

struct cudnnConvolutionStruct {
    bool set;             /* cudnnSetConvolution2dDescriptor succeeded on it */
    int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    cudnnMathType_t math;
};

namespace {

/* Objects of type T created and not yet destroyed: a stale one stops the run. */
template <typename T> std::unordered_set<const T *> &live()
{
    static std::unordered_set<const T *> objects;
    return objects;
}

/* An object argument: false for NULL (the caller returns CUDNN_STATUS_BAD_PARAM); a
 * destroyed one stops the run. */
template <typename T> bool object_ok(const char *what, const char *arg, const T *p)
{
    if (!p) return false;
    if (!live<T>().count(p))
        cuemu::fail("%s: %s %p was destroyed (or never created)", what, arg, (const void *)p);
    return true;
}

template <typename T> cudnnStatus_t create_object(T **out)
{
    if (!out) return CUDNN_STATUS_BAD_PARAM;
    T *p = new T();
    live<T>().insert(p);
    *out = p;
    return CUDNN_STATUS_SUCCESS;
}

template <typename T> cudnnStatus_t destroy_object(const char *what, T *p)
{
    /* NULL: nothing to destroy. Queued work holds copies, never a descriptor. */
    if (!p) return CUDNN_STATUS_SUCCESS;
    object_ok(what, "descriptor", p);
    live<T>().erase(p);
    delete p;
    return CUDNN_STATUS_SUCCESS;
}

bool type_valid(cudnnDataType_t t) { return (int)t >= 0 && (int)t <= CUDNN_DATA_COMPLEX_FP64; }
bool type_supported(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_BFLOAT16; }
size_t element_bytes(cudnnDataType_t t) { return t == CUDNN_DATA_BFLOAT16 ? 2 : 4; }

/* The shared checks of the two 4-D descriptor setters: invalid enumerants and dimensions
 * below 1 are BAD_PARAM; a valid layout or type the emulator lacks (anything but packed
 * NCHW of FLOAT or BFLOAT16), or more than 2^31 - 1 elements, are NOT_SUPPORTED. */
cudnnStatus_t check_4d(cudnnTensorFormat_t format, cudnnDataType_t type, int d0, int d1, int d2,
                       int d3)
{
    if ((int)format < CUDNN_TENSOR_NCHW || (int)format > CUDNN_TENSOR_NCHW_VECT_C ||
        !type_valid(type) || d0 < 1 || d1 < 1 || d2 < 1 || d3 < 1)
        return CUDNN_STATUS_BAD_PARAM;
    if (format != CUDNN_TENSOR_NCHW || !type_supported(type)) return CUDNN_STATUS_NOT_SUPPORTED;
    if ((long long)d0 * d1 * d2 * d3 > INT_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

/* a / b rounded down, for b > 0 and any sign of a. */
long long floor_div(long long a, long long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* A convolution's geometry once its descriptors are checked: x (N, C, H, W), w (K, C, R, S),
 * y (N, K, P, Q). */
struct conv_shape {
    int N, C, H, W, K, R, S, P, Q;
    int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    bool flipped;         /* CUDNN_CONVOLUTION: the filter is applied rotated by 180 degrees */
    cudnnDataType_t type; /* of all three tensors */
    cudnnMathType_t math; /* the descriptor's, at the call */
    size_t x_elems() const { return (size_t)N * C * H * W; }
    size_t w_elems() const { return (size_t)K * C * R * S; }
    size_t y_elems() const { return (size_t)N * K * P * Q; }
};

/* One output extent of a convolution: (in + 2 pad - dil (taps - 1) - 1) / stride + 1, or 0
 * when the dilated filter does not fit the padded input. */
long long out_extent(int in, int pad, int dil, int taps, int stride)
{
    long long span = (long long)in + 2LL * pad - (long long)dil * (taps - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

/* Checks that x, w, conv and y describe one convolution (set, same data type, matching
 * channels, y the shape the convolution gives) and fills g. BAD_PARAM otherwise. */
cudnnStatus_t describe(const char *what, const cudnnTensorStruct *x, const cudnnFilterStruct *w,
                       const cudnnConvolutionStruct *conv, const cudnnTensorStruct *y,
                       conv_shape *g)
{
    if (!object_ok(what, "tensor descriptor", x) || !object_ok(what, "filter descriptor", w) ||
        !object_ok(what, "convolution descriptor", conv) ||
        !object_ok(what, "tensor descriptor", y))
        return CUDNN_STATUS_BAD_PARAM;
    if (!x->set || !w->set || !conv->set || !y->set) return CUDNN_STATUS_BAD_PARAM;
    if (x->type != w->type || x->type != y->type || x->c != w->c) return CUDNN_STATUS_BAD_PARAM;
    const long long P = out_extent(x->h, conv->pad_h, conv->dil_h, w->r, conv->stride_h);
    const long long Q = out_extent(x->w, conv->pad_w, conv->dil_w, w->s, conv->stride_w);
    if (P < 1 || Q < 1 || y->n != x->n || y->c != w->k || y->h != P || y->w != Q)
        return CUDNN_STATUS_BAD_PARAM;
    g->N = x->n, g->C = x->c, g->H = x->h, g->W = x->w;
    g->K = w->k, g->R = w->r, g->S = w->s, g->P = (int)P, g->Q = (int)Q;
    g->pad_h = conv->pad_h, g->pad_w = conv->pad_w;
    g->stride_h = conv->stride_h, g->stride_w = conv->stride_w;
    g->dil_h = conv->dil_h, g->dil_w = conv->dil_w;
    g->flipped = conv->mode == CUDNN_CONVOLUTION;
    g->type = x->type;
    g->math = conv->math;
    return CUDNN_STATUS_SUCCESS;
}

enum direction { DIR_FORWARD, DIR_BACKWARD_DATA, DIR_BACKWARD_FILTER };

constexpr int kFmaAlgo = 0;     /* IMPLICIT_GEMM / BWD_DATA_ALGO_0 / BWD_FILTER_ALGO_0 */
constexpr int kTensorAlgo = 1;  /* IMPLICIT_PRECOMP_GEMM / BWD_DATA_ALGO_1 / BWD_FILTER_ALGO_1 */

size_t output_elems(direction d, const conv_shape &g)
{
    return d == DIR_FORWARD ? g.y_elems() : d == DIR_BACKWARD_DATA ? g.x_elems() : g.w_elems();
}

/* Workspace bytes algorithm `algo` needs in direction d. */
size_t workspace_bytes(direction d, const conv_shape &g, int algo)
{
    return algo == kTensorAlgo ? 4 * output_elems(d, g) : 0;
}

/* Whether the emulator runs algorithm `algo` on g's data type under g's math type: the FMA
 * one on fp32 tensors only; the tensor-core one on both, but on bf16 tensors not under
 * CUDNN_FMA_MATH (fp32 tensors then run it on FMA units, exactly). */
bool algo_runs(const conv_shape &g, int algo)
{
    if (algo == kFmaAlgo) return g.type == CUDNN_DATA_FLOAT;
    return g.type == CUDNN_DATA_FLOAT || g.math != CUDNN_FMA_MATH;
}

/* What cudnnFind* reports for one algorithm. */
struct perf_entry {
    int algo;
    cudnnStatus_t status;
    float time_ms;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
};

/* The perf results of direction d, sorted as cuDNN sorts them: successful ones fastest
 * first, failed ones (status NOT_SUPPORTED, time -1) after. Under CUDNN_FMA_MATH only the
 * FMA algorithm is tried; otherwise both, the tensor-core one first (the emulated times
 * assume tensor cores 4x faster). On bf16 tensors the FMA algorithm is listed as
 * NOT_SUPPORTED. As in cuDNN's enum, the backward algorithms 0 are non-deterministic. */
std::vector<perf_entry> find_results(direction d, const conv_shape &g)
{
    const double macs = (double)g.N * g.K * g.P * g.Q * g.C * g.R * g.S;
    const float fma_ms = (float)(macs / 2e9 + 0.01), tensor_ms = fma_ms / 4;
    std::vector<perf_entry> ok, failed;
    if (g.math != CUDNN_FMA_MATH)
        ok.push_back({kTensorAlgo, CUDNN_STATUS_SUCCESS, tensor_ms,
                      workspace_bytes(d, g, kTensorAlgo), CUDNN_DETERMINISTIC,
                      CUDNN_TENSOR_OP_MATH});
    perf_entry fma = {kFmaAlgo, CUDNN_STATUS_SUCCESS, fma_ms, 0,
                      d == DIR_FORWARD ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC,
                      CUDNN_FMA_MATH};
    if (algo_runs(g, kFmaAlgo)) {
        ok.push_back(fma);
    } else {
        fma.status = CUDNN_STATUS_NOT_SUPPORTED, fma.time_ms = -1.0f;
        failed.push_back(fma);
    }
    std::stable_sort(ok.begin(), ok.end(), [](const perf_entry &a, const perf_entry &b) {
        return a.time_ms < b.time_ms;
    });
    /* CUEMU_CUDNN_FIND tries the caller's other paths: "none", no algorithm succeeds (as
     * when cuDNN lacks one for the shape); "default-math", the results name
     * CUDNN_DEFAULT_MATH instead of CUDNN_FMA_MATH */
    static const char *mode = getenv("CUEMU_CUDNN_FIND");
    if (mode && !strcmp(mode, "none")) {
        for (perf_entry &e : ok) e.status = CUDNN_STATUS_NOT_SUPPORTED, e.time_ms = -1.0f;
    } else if (mode && !strcmp(mode, "default-math")) {
        for (perf_entry &e : ok)
            if (e.math == CUDNN_FMA_MATH) e.math = CUDNN_DEFAULT_MATH;
    } else if (mode && *mode) {
        cuemu::fail("CUEMU_CUDNN_FIND=%s: expected none or default-math", mode);
    }
    ok.insert(ok.end(), failed.begin(), failed.end());
    return ok;
}

/* The body of the three cudnnFind*: checks the counts and writes the results into a perf
 * array of cuDNN's struct type (all three share their layout but not their algo enum). */
template <typename Perf, typename Algo>
cudnnStatus_t find(const char *what, cudnnHandle_t handle, direction d, cudnnStatus_t described,
                   const conv_shape &g, int requested, int *returned, Perf *results)
{
    if (!object_ok(what, "handle", handle)) return CUDNN_STATUS_BAD_PARAM;
    if (described != CUDNN_STATUS_SUCCESS) return described;
    if (requested < 1 || !returned || !results) return CUDNN_STATUS_BAD_PARAM;
    const std::vector<perf_entry> all = find_results(d, g);
    const int n = std::min(requested, (int)all.size());
    for (int i = 0; i < n; i++) {
        Perf p;
        memset(&p, 0, sizeof p);
        p.algo = (Algo)all[i].algo;
        p.status = all[i].status;
        p.time = all[i].time_ms;
        p.memory = all[i].memory;
        p.determinism = all[i].determinism;
        p.mathType = all[i].math;
        results[i] = p;
    }
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ arithmetic */

/* The output positions o in [lo, hi) of one axis whose input position o stride - pad +
 * tap dil lies inside [0, in): precomputed per filter tap so that the inner loops need no
 * bounds tests. */
struct tap_range {
    int lo, hi;
};

std::vector<tap_range> tap_ranges(int in, int out, int stride, int pad, int dil, int taps)
{
    std::vector<tap_range> ranges((size_t)taps);
    for (int t = 0; t < taps; t++) {
        const long long offset = (long long)t * dil - pad; /* input = o stride + offset */
        long long lo = -floor_div(offset, stride);         /* ceil(-offset / stride) */
        long long hi = floor_div((long long)in - 1 - offset, stride) + 1;
        lo = std::max(lo, 0LL);
        hi = std::min(hi, (long long)out);
        ranges[(size_t)t] = {(int)lo, (int)std::max(lo, hi)};
    }
    return ranges;
}

/* Tensor data as floats: bf16 converted (exactly), fp32 copied or rounded to TF32. When
 * `flip`, the data is a KCRS filter and each R x S plane is stored rotated by 180 degrees,
 * so that CUDNN_CONVOLUTION runs as a cross-correlation. */
std::vector<float> load(const void *p, size_t n, cudnnDataType_t type, bool tf32, bool flip = false,
                        int R = 1, int S = 1)
{
    std::vector<float> out(n);
    if (type == CUDNN_DATA_BFLOAT16) {
        const uint16_t *h = static_cast<const uint16_t *>(p);
        for (size_t i = 0; i < n; i++) out[i] = cuemu::bf16_to_float(h[i]);
    } else {
        const float *f = static_cast<const float *>(p);
        for (size_t i = 0; i < n; i++) out[i] = tf32 ? cuemu::round_tf32(f[i]) : f[i];
    }
    if (flip) {
        const size_t plane = (size_t)R * S;
        for (size_t base = 0; base < n; base += plane) std::reverse(&out[base], &out[base] + plane);
    }
    return out;
}

/* The three inner loops, over one output row: with unit stride they run on 4-float vectors
 * (GCC and Clang vector types: at -O2 neither compiler vectorizes the plain loops). Each
 * element still sees its terms in the same order. */
typedef float float4v __attribute__((vector_size(16)));

inline float4v load4(const float *p)
{
    float4v v;
    memcpy(&v, p, sizeof v);
    return v;
}

inline void store4(float *p, float4v v) { memcpy(p, &v, sizeof v); }

/* y[i] += a x[i stride] for i in [0, n). */
inline void axpy_gather(float *__restrict y, const float *__restrict x, int stride, float a, int n)
{
    int i = 0;
    if (stride == 1)
        for (; i + 4 <= n; i += 4) store4(y + i, load4(y + i) + a * load4(x + i));
    for (; i < n; i++) y[i] += a * x[(size_t)i * stride];
}

/* y[i stride] += a x[i] for i in [0, n). */
inline void axpy_scatter(float *__restrict y, int stride, const float *__restrict x, float a, int n)
{
    int i = 0;
    if (stride == 1)
        for (; i + 4 <= n; i += 4) store4(y + i, load4(y + i) + a * load4(x + i));
    for (; i < n; i++) y[(size_t)i * stride] += a * x[i];
}

/* sum[i] += a[i] b[i stride] for i in [0, n). */
inline void multiply_add(float *__restrict sum, const float *__restrict a,
                         const float *__restrict b, int stride, int n)
{
    int i = 0;
    if (stride == 1)
        for (; i + 4 <= n; i += 4) store4(sum + i, load4(sum + i) + load4(a + i) * load4(b + i));
    for (; i < n; i++) sum[i] += a[i] * b[(size_t)i * stride];
}

/* y (N, K, P, Q) = cross-correlation of x with w; y is zeroed here. */
void forward(const conv_shape &g, const float *x, const float *w, float *y)
{
    const auto rows = tap_ranges(g.H, g.P, g.stride_h, g.pad_h, g.dil_h, g.R);
    const auto cols = tap_ranges(g.W, g.Q, g.stride_w, g.pad_w, g.dil_w, g.S);
    const size_t PQ = (size_t)g.P * g.Q, HW = (size_t)g.H * g.W;
    std::fill(y, y + g.y_elems(), 0.0f);
    for (int n = 0; n < g.N; n++)
        for (int k = 0; k < g.K; k++) {
            float *y_plane = y + ((size_t)n * g.K + k) * PQ;
            for (int c = 0; c < g.C; c++) {
                const float *x_plane = x + ((size_t)n * g.C + c) * HW;
                const float *w_plane = w + ((size_t)k * g.C + c) * g.R * g.S;
                for (int r = 0; r < g.R; r++)
                    for (int s = 0; s < g.S; s++) {
                        const float wv = w_plane[r * g.S + s];
                        const int col_off = s * g.dil_w - g.pad_w, q0 = cols[s].lo, q1 = cols[s].hi;
                        for (int p = rows[r].lo; p < rows[r].hi; p++) {
                            const int h = p * g.stride_h - g.pad_h + r * g.dil_h;
                            const float *x_row = x_plane + (size_t)h * g.W;
                            float *y_row = y_plane + (size_t)p * g.Q;
                            axpy_gather(y_row + q0, x_row + (q0 * g.stride_w + col_off),
                                        g.stride_w, wv, q1 - q0);
                        }
                    }
            }
        }
}

/* dx (N, C, H, W) = the transposed convolution of dy with w (each dy element spread back
 * over the inputs it was computed from); dx is zeroed here. */
void backward_data(const conv_shape &g, const float *dy, const float *w, float *dx)
{
    const auto rows = tap_ranges(g.H, g.P, g.stride_h, g.pad_h, g.dil_h, g.R);
    const auto cols = tap_ranges(g.W, g.Q, g.stride_w, g.pad_w, g.dil_w, g.S);
    const size_t PQ = (size_t)g.P * g.Q, HW = (size_t)g.H * g.W;
    std::fill(dx, dx + g.x_elems(), 0.0f);
    for (int n = 0; n < g.N; n++)
        for (int c = 0; c < g.C; c++) {
            float *dx_plane = dx + ((size_t)n * g.C + c) * HW;
            for (int k = 0; k < g.K; k++) {
                const float *dy_plane = dy + ((size_t)n * g.K + k) * PQ;
                const float *w_plane = w + ((size_t)k * g.C + c) * g.R * g.S;
                for (int r = 0; r < g.R; r++)
                    for (int s = 0; s < g.S; s++) {
                        const float wv = w_plane[r * g.S + s];
                        const int col_off = s * g.dil_w - g.pad_w, q0 = cols[s].lo, q1 = cols[s].hi;
                        for (int p = rows[r].lo; p < rows[r].hi; p++) {
                            const int h = p * g.stride_h - g.pad_h + r * g.dil_h;
                            float *dx_row = dx_plane + (size_t)h * g.W;
                            const float *dy_row = dy_plane + (size_t)p * g.Q;
                            axpy_scatter(dx_row + (q0 * g.stride_w + col_off), g.stride_w,
                                         dy_row + q0, wv, q1 - q0);
                        }
                    }
            }
        }
}

/* dw (K, C, R, S) = sum over samples and output positions of dy times the input each filter
 * tap saw. Each tap sums per output column first (rows of partial sums, which vectorize),
 * then across the row. */
void backward_filter(const conv_shape &g, const float *x, const float *dy, float *dw)
{
    const auto rows = tap_ranges(g.H, g.P, g.stride_h, g.pad_h, g.dil_h, g.R);
    const auto cols = tap_ranges(g.W, g.Q, g.stride_w, g.pad_w, g.dil_w, g.S);
    const size_t PQ = (size_t)g.P * g.Q, HW = (size_t)g.H * g.W, RS = (size_t)g.R * g.S;
    std::vector<float> partial(RS * g.Q);
    for (int k = 0; k < g.K; k++)
        for (int c = 0; c < g.C; c++) {
            std::fill(partial.begin(), partial.end(), 0.0f);
            for (int n = 0; n < g.N; n++) {
                const float *x_plane = x + ((size_t)n * g.C + c) * HW;
                const float *dy_plane = dy + ((size_t)n * g.K + k) * PQ;
                for (int r = 0; r < g.R; r++)
                    for (int s = 0; s < g.S; s++) {
                        float *sums = partial.data() + ((size_t)r * g.S + s) * g.Q;
                        const int col_off = s * g.dil_w - g.pad_w, q0 = cols[s].lo, q1 = cols[s].hi;
                        for (int p = rows[r].lo; p < rows[r].hi; p++) {
                            const int h = p * g.stride_h - g.pad_h + r * g.dil_h;
                            const float *x_row = x_plane + (size_t)h * g.W;
                            const float *dy_row = dy_plane + (size_t)p * g.Q;
                            multiply_add(sums + q0, dy_row + q0,
                                         x_row + (q0 * g.stride_w + col_off), g.stride_w,
                                         q1 - q0);
                        }
                    }
            }
            float *dw_plane = dw + ((size_t)k * g.C + c) * RS;
            for (size_t t = 0; t < RS; t++) {
                float total = 0.0f;
                for (int q = 0; q < g.Q; q++) total += partial[t * g.Q + q];
                dw_plane[t] = total;
            }
        }
}

/* One queued convolution: everything it needs, copied at the call. in1, in2 are the inputs
 * in the order of the entry point's arguments (forward: x, w; backward data: w, dy;
 * backward filter: x, dy). */
struct conv_job {
    direction dir;
    conv_shape g{};
    const char *what;
    int device;
    float alpha, beta;
    bool tf32;
    const void *in1, *in2;
    void *out;
    size_t in1_bytes, in2_bytes, out_bytes;
    void *workspace;
    size_t workspace_used;  /* the algorithm's requirement (0: untouched) */
};

void check_live(const conv_job &j, const char *in1_name, const char *in2_name,
                const char *out_name)
{
    cuemu::check_device_range(j.what, in1_name, j.device, j.in1, j.in1_bytes);
    cuemu::check_device_range(j.what, in2_name, j.device, j.in2, j.in2_bytes);
    cuemu::check_device_range(j.what, out_name, j.device, j.out, j.out_bytes);
    if (j.workspace_used)
        cuemu::check_device_range(j.what, "workSpace", j.device, j.workspace, j.workspace_used);
}

/* Runs the job: out = alpha conv + beta out (beta 0: out is not read). The workspace is
 * filled with NaN bytes first, as scratch the algorithm owns. */
void run_conv(const conv_job &j)
{
    const conv_shape &g = j.g;
    if (j.workspace_used) memset(j.workspace, 0xff, j.workspace_used);
    const size_t n_out = output_elems(j.dir, g);
    std::vector<float> result(n_out);
    if (j.dir == DIR_FORWARD) {
        std::vector<float> x = load(j.in1, g.x_elems(), g.type, j.tf32);
        std::vector<float> w = load(j.in2, g.w_elems(), g.type, j.tf32, g.flipped, g.R, g.S);
        forward(g, x.data(), w.data(), result.data());
    } else if (j.dir == DIR_BACKWARD_DATA) {
        std::vector<float> w = load(j.in1, g.w_elems(), g.type, j.tf32, g.flipped, g.R, g.S);
        std::vector<float> dy = load(j.in2, g.y_elems(), g.type, j.tf32);
        backward_data(g, dy.data(), w.data(), result.data());
    } else {
        std::vector<float> x = load(j.in1, g.x_elems(), g.type, j.tf32);
        std::vector<float> dy = load(j.in2, g.y_elems(), g.type, j.tf32);
        std::vector<float> dw_flipped(g.w_elems());
        backward_filter(g, x.data(), dy.data(), g.flipped ? dw_flipped.data() : result.data());
        if (g.flipped) /* the gradient of the rotated filter, rotated back */
            result = load(dw_flipped.data(), g.w_elems(), CUDNN_DATA_FLOAT, false, true, g.R, g.S);
    }
    if (g.type == CUDNN_DATA_BFLOAT16) {
        uint16_t *out = static_cast<uint16_t *>(j.out);
        for (size_t i = 0; i < n_out; i++) {
            float v = j.alpha * result[i];
            if (j.beta != 0.0f) v += j.beta * cuemu::bf16_to_float(out[i]);
            out[i] = cuemu::float_to_bf16(v);
        }
    } else {
        float *out = static_cast<float *>(j.out);
        for (size_t i = 0; i < n_out; i++)
            out[i] = j.beta == 0.0f ? j.alpha * result[i] : j.alpha * result[i] + j.beta * out[i];
    }
}

bool overlaps(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

/* The shared body of the three convolution entry points, after describe(): checks the
 * algorithm, scaling factors, workspace and memory, then queues the job on the handle's
 * stream. algo_count is the direction's *_ALGO_COUNT. */
cudnnStatus_t convolve(const char *what, direction d, cudnnHandle_t handle,
                       cudnnStatus_t described, const conv_shape &g, int algo, int algo_count,
                       const void *alpha, const void *beta, const void *in1, const char *in1_name,
                       const void *in2, const char *in2_name, void *out, const char *out_name,
                       void *workSpace, size_t workSpaceSizeInBytes)
{
    if (!object_ok(what, "handle", handle)) return CUDNN_STATUS_BAD_PARAM;
    if (described != CUDNN_STATUS_SUCCESS) return described;
    if (algo < 0 || algo >= algo_count || !alpha || !beta) return CUDNN_STATUS_BAD_PARAM;
    if ((algo != kFmaAlgo && algo != kTensorAlgo) || !algo_runs(g, algo))
        return CUDNN_STATUS_NOT_SUPPORTED;
    const size_t need = workspace_bytes(d, g, algo);
    if (workSpaceSizeInBytes < need || (need && !workSpace)) return CUDNN_STATUS_BAD_PARAM;

    const int dev = cuemu::library_device(what, handle->device, handle->stream, alpha, beta);

    conv_job j;
    j.dir = d;
    j.g = g;
    j.what = what;
    j.device = dev;
    j.alpha = *static_cast<const float *>(alpha);
    j.beta = *static_cast<const float *>(beta);
    j.tf32 = g.type == CUDNN_DATA_FLOAT && algo == kTensorAlgo && g.math != CUDNN_FMA_MATH;
    j.in1 = in1, j.in2 = in2, j.out = out;
    const size_t es = element_bytes(g.type);
    const size_t x_bytes = g.x_elems() * es, w_bytes = g.w_elems() * es, y_bytes = g.y_elems() * es;
    j.in1_bytes = d == DIR_BACKWARD_DATA ? w_bytes : x_bytes;
    j.in2_bytes = d == DIR_FORWARD ? w_bytes : y_bytes;
    j.out_bytes = d == DIR_FORWARD ? y_bytes : d == DIR_BACKWARD_DATA ? x_bytes : w_bytes;
    j.workspace = workSpace;
    j.workspace_used = need;

    check_live(j, in1_name, in2_name, out_name);
    const void *ptrs[3] = {in1, in2, out};
    const char *names[3] = {in1_name, in2_name, out_name};
    for (int i = 0; i < 3; i++)
        if ((uintptr_t)ptrs[i] % es)
            cuemu::fail("%s: %s (%p) is not aligned to its %zu-byte elements", what, names[i],
                        ptrs[i], es);
    if (overlaps(out, j.out_bytes, in1, j.in1_bytes) ||
        overlaps(out, j.out_bytes, in2, j.in2_bytes))
        cuemu::fail("%s: the output %s overlaps an input (cuDNN does not convolve in place)", what,
                    out_name);
    if (need && (overlaps(workSpace, need, in1, j.in1_bytes) ||
                 overlaps(workSpace, need, in2, j.in2_bytes) ||
                 overlaps(workSpace, need, out, j.out_bytes)))
        cuemu::fail("%s: the workspace overlaps a tensor", what);

    /* checked again when it runs: a buffer freed before the queued convolution ran faults */
    cuemu::enqueue(handle->stream, what, [j, in1_name, in2_name, out_name]() {
        check_live(j, in1_name, in2_name, out_name);
        run_conv(j);
    });
    return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

/* ------------------------------------------------------------------ library, handles */

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

/* The status's enumerator name, as the real library returns it. */
const char *cudnnGetErrorString(cudnnStatus_t status)
{
#define STATUS_NAME(s) \
    case s: return #s;
    switch (status) {
        STATUS_NAME(CUDNN_STATUS_SUCCESS)
        STATUS_NAME(CUDNN_STATUS_NOT_INITIALIZED)
        STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_DEPRECATED)
        STATUS_NAME(CUDNN_STATUS_LICENSE_ERROR)
        STATUS_NAME(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
        STATUS_NAME(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
        STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM)
        STATUS_NAME(CUDNN_STATUS_INVALID_VALUE)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
        STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
        STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
        STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
    }
#undef STATUS_NAME
    return "CUDNN_STATUS_UNKNOWN";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    cuemu::lock hold;
    cudnnStatus_t st = create_object(handle);
    if (st == CUDNN_STATUS_SUCCESS) (*handle)->device = cuemu::current_device();
    return st;
}

/* Like the real one, synchronizes the handle's device first (cuDNN documents that
 * cudnnDestroy implies cudaDeviceSynchronize); the current device is kept. */
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    cuemu::lock hold;
    if (!object_ok("cudnnDestroy", "handle", handle)) return CUDNN_STATUS_BAD_PARAM;
    const int current = cuemu::current_device();
    cudaSetDevice(handle->device);
    cudaDeviceSynchronize();
    cudaSetDevice(current);
    return destroy_object("cudnnDestroy", handle);
}

/* The stream is only recorded; each convolution checks it belongs to the handle's device. */
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    cuemu::lock hold;
    if (!object_ok("cudnnSetStream", "handle", handle)) return CUDNN_STATUS_BAD_PARAM;
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ descriptors */

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc)
{
    cuemu::lock hold;
    return create_object(tensorDesc);
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc)
{
    cuemu::lock hold;
    return destroy_object("cudnnDestroyTensorDescriptor", tensorDesc);
}

/* A packed NCHW tensor of FLOAT or BFLOAT16 elements (see check_4d for the statuses). */
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w)
{
    cuemu::lock hold;
    if (!object_ok("cudnnSetTensor4dDescriptor", "tensorDesc", tensorDesc))
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = check_4d(format, dataType, n, c, h, w);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    *tensorDesc = {true, dataType, n, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc)
{
    cuemu::lock hold;
    return create_object(filterDesc);
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc)
{
    cuemu::lock hold;
    return destroy_object("cudnnDestroyFilterDescriptor", filterDesc);
}

/* A packed KCRS filter (format NCHW) of FLOAT or BFLOAT16 elements. Note the argument order:
 * the data type comes before the format. */
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w)
{
    cuemu::lock hold;
    if (!object_ok("cudnnSetFilter4dDescriptor", "filterDesc", filterDesc))
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = check_4d(format, dataType, k, c, h, w);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    *filterDesc = {true, dataType, k, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

/* A new convolution descriptor has math type CUDNN_DEFAULT_MATH and no geometry yet. */
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc)
{
    cuemu::lock hold;
    cudnnStatus_t st = create_object(convDesc);
    if (st == CUDNN_STATUS_SUCCESS) (*convDesc)->math = CUDNN_DEFAULT_MATH;
    return st;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc)
{
    cuemu::lock hold;
    return destroy_object("cudnnDestroyConvolutionDescriptor", convDesc);
}

/* BAD_PARAM: negative padding, stride or dilation below 1, an invalid mode or compute type;
 * NOT_SUPPORTED: a compute type other than FLOAT. Any dilation is supported. The math type
 * is kept. */
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType)
{
    cuemu::lock hold;
    if (!object_ok("cudnnSetConvolution2dDescriptor", "convDesc", convDesc))
        return CUDNN_STATUS_BAD_PARAM;
    if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 || dilation_w < 1 ||
        (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) || !type_valid(computeType))
        return CUDNN_STATUS_BAD_PARAM;
    if (computeType != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
    convDesc->set = true;
    convDesc->pad_h = pad_h, convDesc->pad_w = pad_w;
    convDesc->stride_h = u, convDesc->stride_w = v;
    convDesc->dil_h = dilation_h, convDesc->dil_w = dilation_w;
    convDesc->mode = mode;
    convDesc->compute = computeType;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType)
{
    cuemu::lock hold;
    if (!object_ok("cudnnSetConvolutionMathType", "convDesc", convDesc))
        return CUDNN_STATUS_BAD_PARAM;
    if ((int)mathType < CUDNN_DEFAULT_MATH || (int)mathType > CUDNN_FMA_MATH)
        return CUDNN_STATUS_BAD_PARAM;
    convDesc->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t *mathType)
{
    cuemu::lock hold;
    if (!object_ok("cudnnGetConvolutionMathType", "convDesc", convDesc) || !mathType)
        return CUDNN_STATUS_BAD_PARAM;
    *mathType = convDesc->math;
    return CUDNN_STATUS_SUCCESS;
}

/* The output (n, c, h, w) of convolving inputTensorDesc with filterDesc: BAD_PARAM when a
 * descriptor is unset, the data types or input channels differ, or the filter does not fit
 * the padded input. */
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int *n, int *c, int *h, int *w)
{
    cuemu::lock hold;
    const char *what = "cudnnGetConvolution2dForwardOutputDim";
    if (!object_ok(what, "convDesc", convDesc) ||
        !object_ok(what, "inputTensorDesc", inputTensorDesc) ||
        !object_ok(what, "filterDesc", filterDesc) || !n || !c || !h || !w)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnTensorStruct *x = inputTensorDesc;
    const cudnnFilterStruct *f = filterDesc;
    if (!convDesc->set || !x->set || !f->set || x->type != f->type || x->c != f->c)
        return CUDNN_STATUS_BAD_PARAM;
    const cudnnConvolutionStruct *cv = convDesc;
    const long long P = out_extent(x->h, cv->pad_h, cv->dil_h, f->r, cv->stride_h);
    const long long Q = out_extent(x->w, cv->pad_w, cv->dil_w, f->s, cv->stride_w);
    if (P < 1 || Q < 1) return CUDNN_STATUS_BAD_PARAM;
    *n = x->n, *c = f->k, *h = (int)P, *w = (int)Q;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ algorithm search */

/* The three searches take descriptors only and run nothing: they return at once with the
 * results find_results() lists (at most requestedAlgoCount of them). */
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t handle,
                                                   const cudnnTensorDescriptor_t xDesc,
                                                   const cudnnFilterDescriptor_t wDesc,
                                                   const cudnnConvolutionDescriptor_t convDesc,
                                                   const cudnnTensorDescriptor_t yDesc,
                                                   const int requestedAlgoCount,
                                                   int *returnedAlgoCount,
                                                   cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    cuemu::lock hold;
    const char *what = "cudnnFindConvolutionForwardAlgorithm";
    conv_shape g{};
    cudnnStatus_t st = describe(what, xDesc, wDesc, convDesc, yDesc, &g);
    return find<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
        what, handle, DIR_FORWARD, st, g, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    cuemu::lock hold;
    const char *what = "cudnnFindConvolutionBackwardDataAlgorithm";
    conv_shape g{};
    cudnnStatus_t st = describe(what, dxDesc, wDesc, convDesc, dyDesc, &g);
    return find<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
        what, handle, DIR_BACKWARD_DATA, st, g, requestedAlgoCount, returnedAlgoCount,
        perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t dwDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    cuemu::lock hold;
    const char *what = "cudnnFindConvolutionBackwardFilterAlgorithm";
    conv_shape g{};
    cudnnStatus_t st = describe(what, xDesc, dwDesc, convDesc, dyDesc, &g);
    return find<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
        what, handle, DIR_BACKWARD_FILTER, st, g, requestedAlgoCount, returnedAlgoCount,
        perfResults);
}

/* ------------------------------------------------------------------ convolutions */

/* y = alpha conv(x, w) + beta y. */
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y)
{
    cuemu::lock hold;
    const char *what = "cudnnConvolutionForward";
    conv_shape g{};
    cudnnStatus_t st = describe(what, xDesc, wDesc, convDesc, yDesc, &g);
    return convolve(what, DIR_FORWARD, handle, st, g, algo, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                    alpha, beta, x, "x", w, "w", y, "y", workSpace, workSpaceSizeInBytes);
}

/* dx = alpha (the gradient of conv with respect to its input, given dy) + beta dx. */
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    cuemu::lock hold;
    const char *what = "cudnnConvolutionBackwardData";
    conv_shape g{};
    cudnnStatus_t st = describe(what, dxDesc, wDesc, convDesc, dyDesc, &g);
    return convolve(what, DIR_BACKWARD_DATA, handle, st, g, algo,
                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, alpha, beta, w, "w", dy, "dy", dx,
                    "dx", workSpace, workSpaceSizeInBytes);
}

/* dw = alpha (the gradient of conv with respect to its filter, given x and dy) + beta dw. */
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                             void *workSpace, size_t workSpaceSizeInBytes,
                                             const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    cuemu::lock hold;
    const char *what = "cudnnConvolutionBackwardFilter";
    conv_shape g{};
    cudnnStatus_t st = describe(what, xDesc, dwDesc, convDesc, dyDesc, &g);
    return convolve(what, DIR_BACKWARD_FILTER, handle, st, g, algo,
                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, alpha, beta, x, "x", dy, "dy", dw,
                    "dw", workSpace, workSpaceSizeInBytes);
}

}  // extern "C"
