# plumb: one Makefile. `make` builds ./plumb and libplumb.a; `make demo` runs the shipped
# example; `make test` runs every Criterion suite and end-to-end test. BUILD=dir puts the
# objects elsewhere; SAN=1 builds with AddressSanitizer and UBSan.

BUILD   ?= build
CONFIG  := $(BUILD)/config
CC      ?= cc
CFLAGS_BASE := -std=c11 -Wall -Wextra -Werror -O2 -g -D_POSIX_C_SOURCE=200809L -I. -Icore
ifeq ($(SAN),1)
  CFLAGS_BASE += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDSAN := -fsanitize=address,undefined
endif
CFLAGS  += $(CFLAGS_BASE)
LDLIBS  := -lcjson -lopenblas -lncursesw -lz -lpthread -lm
CUDA_HOME ?= /usr/local/cuda
HASH := \#

.DEFAULT_GOAL := all
.PHONY: all deps demo test test-unit test-e2e test-long bench fuzz clean optional-parts gpu-bundle

# --- Debian packages first -------------------------------------------------------------
# For the goals that install what is missing, deps.sh runs while this Makefile is read, so
# the optional parts below are detected after it (a fresh machine's first build has MPI).
# Sub-makes and builds of named files (bench/gpu-check.sh on an offline GPU machine) skip it.
DEPS_GOALS := deps all test test-long demo bench fuzz
ifneq ($(filter $(DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
  ifndef PLUMB_DEPS_DONE
    ifneq ($(shell scripts/deps.sh >&2; echo $$?),0)
      $(error plumb: the Debian packages above are missing; install them and run make again)
    endif
    export PLUMB_DEPS_DONE := 1
  endif
endif

# --- optional parts: detected by a test compile, one line each --------------------------
NVCC := $(shell command -v nvcc 2>/dev/null || ls $(CUDA_HOME)/bin/nvcc 2>/dev/null)
HAVE_CUDA := $(shell [ -n "$(NVCC)" ] && printf '__global__ void k(){}\nint main(){k<<<1,1>>>();return 0;}\n' > /tmp/plumb-nvcc-$$$$.cu && $(NVCC) -c -o /dev/null /tmp/plumb-nvcc-$$$$.cu >/dev/null 2>&1 && echo 1; rm -f /tmp/plumb-nvcc-$$$$.cu)
HAVE_CUDNN := $(shell [ "$(HAVE_CUDA)" = 1 ] && printf '$(HASH)include <cudnn.h>\nint main(void){return (int)cudnnGetVersion()==0;}\n' | $(CC) -x c - -I$(CUDA_HOME)/include -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -lcudnn -o /dev/null >/dev/null 2>&1 && echo 1)
HAVE_NCCL := $(shell [ "$(HAVE_CUDA)" = 1 ] && printf '$(HASH)include <nccl.h>\nint main(void){int v;return ncclGetVersion(&v);}\n' | $(CC) -x c - -I$(CUDA_HOME)/include -L$(CUDA_HOME)/lib -L$(CUDA_HOME)/lib64 -lnccl -o /dev/null >/dev/null 2>&1 && echo 1)
MPICC := $(shell command -v mpicc 2>/dev/null)
HAVE_MPI := $(shell [ -n "$(MPICC)" ] && printf '$(HASH)include <mpi.h>\nint main(void){return MPI_Init(0,0);}\n' | $(MPICC) -x c - -o /dev/null >/dev/null 2>&1 && echo 1)

# --- sources ---------------------------------------------------------------------------
# libplumb.a has no CUDA or MPI symbol: the CUDA backend and the mpi and nccl transports are
# plugins, shared objects next to the binary that it loads when --backend cuda or
# --transport mpi|nccl asks for them (exec/plugin.h), so that every other command starts
# without mapping cuBLAS, cuDNN, NCCL or MPI.
LIB_SRCS := $(wildcard core/*.c sim/*.c planner/*.c exec/*.c exec/cpu/*.c ui/*.c cli/cmd_*.c)
CUDA_SRCS := $(wildcard exec/cuda/*.cu)
CUDA_CSRCS := $(wildcard exec/cuda/*.c)
MPI_SRCS := $(wildcard exec/mpi/*.c)
NCCL_PLUGIN_SRCS := $(filter exec/cuda/cuda_nccl%.c,$(CUDA_CSRCS)) $(filter exec/mpi/nccl_%.c,$(MPI_SRCS))
CUDA_PLUGIN_SRCS := $(filter-out $(NCCL_PLUGIN_SRCS),$(CUDA_CSRCS))
MPI_PLUGIN_SRCS := $(filter-out $(NCCL_PLUGIN_SRCS),$(MPI_SRCS))
CUDA_PLUGIN_OBJS := $(CUDA_PLUGIN_SRCS:%.c=$(BUILD)/obj/%.o) $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.o)
MPI_PLUGIN_OBJS := $(MPI_PLUGIN_SRCS:%.c=$(BUILD)/obj/%.o)
NCCL_PLUGIN_OBJS := $(NCCL_PLUGIN_SRCS:%.c=$(BUILD)/obj/%.o)
# the NCCL layer's CUDA side, which tests/test_cuda.c links (stubs without NCCL)
NCCL_CUDA_OBJS := $(filter $(BUILD)/obj/exec/cuda/%,$(NCCL_PLUGIN_OBJS))
PIC_ERR := $(BUILD)/obj/pic/core/err.o # each plugin's own copy of err_set
PLUGINS :=
ifeq ($(HAVE_CUDA),1)
  CFLAGS += -DPLUMB_HAVE_CUDA -I$(CUDA_HOME)/include
  CUDA_LDPATH := -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -Wl,-rpath,$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib
  CUDA_LIBS := $(CUDA_LDPATH) -lcublas -lcudart -lstdc++
  PLUGINS += $(BUILD)/plumb-cuda.so
  ifeq ($(HAVE_CUDNN),1)
    CFLAGS += -DPLUMB_HAVE_CUDNN
    CUDA_LIBS += -lcudnn
  endif
  ifeq ($(HAVE_NCCL),1)
    CFLAGS += -DPLUMB_HAVE_NCCL
    NCCL_LIBS := $(CUDA_LDPATH) -lcudart -lnccl
  endif
endif
ifeq ($(HAVE_MPI),1)
  MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
  MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null)
  CFLAGS += -DPLUMB_HAVE_MPI
  PLUGINS += $(BUILD)/plumb-mpi.so
  ifeq ($(HAVE_CUDA)$(HAVE_NCCL),11)
    PLUGINS += $(BUILD)/plumb-nccl.so
  endif
endif
# machine code for Hopper (sm_90) and Ampere/Ada (sm_80, which sm_86 and sm_89 run), and
# compute_75 PTX (CUDA 13's oldest target) that any other GPU JIT-compiles at load
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
             -gencode arch=compute_75,code=compute_75
NVCCFLAGS ?= -O2 -std=c++17 $(NVCC_ARCH) -Icore -I. -Xcompiler -Wall

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
LIB := $(BUILD)/libplumb.a
BIN := $(BUILD)/plumb
ifeq ($(HAVE_CUDA),1)
  include tests/cuemu/cuemu.mk
endif

# The flags every object is built with, kept in $(CONFIG): when they change (an optional
# part found, SAN, CFLAGS on the command line) every object is rebuilt
CONFIG_TEXT := $(CC) $(CFLAGS) $(MPI_CFLAGS) | $(NVCC) $(NVCCFLAGS) | $(LDLIBS) | $(CUDA_LIBS) | $(NCCL_LIBS) | $(MPI_LIBS) | $(EMU_CXXFLAGS)
ifneq ($(MAKECMDGOALS),clean)
  ifneq ($(file <$(CONFIG)),$(CONFIG_TEXT))
    $(shell mkdir -p $(BUILD))
    $(file >$(CONFIG),$(CONFIG_TEXT))
  endif
endif

BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
# each fuzz target, without libFuzzer, replayed over its seeds (tests/e2e/fuzz-replay.sh)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
TEST_EXTRA := $(FUZZ_SRCS:tests/fuzz/fuzz_%.c=$(BUILD)/fuzz/replay_%) $(BUILD)/bench/bench_gemm
ifeq ($(HAVE_CUDA),1) # the CUDA backend on cuemu (tests/cuemu/cuemu.mk)
  TEST_BINS += $(EMU_TEST) $(EMU_SELFTEST)
  TEST_EXTRA += $(EMU_BIN)
endif

# --- rules -----------------------------------------------------------------------------
# ./plumb finds its plugins next to itself: they are copied alongside it
all: optional-parts $(BIN) $(LIB) $(PLUGINS)
ifeq ($(BUILD),build)
	@cp -f $(BIN) ./plumb && cp -f $(LIB) ./libplumb.a
	@rm -f ./plumb-cuda.so ./plumb-mpi.so ./plumb-nccl.so
	@for f in $(PLUGINS); do cp -f $$f . || exit 1; done
endif

deps: # deps.sh ran while the Makefile was read
	@:

optional-parts:
	@echo "plumb: CUDA backend: $(if $(filter 1,$(HAVE_CUDA)),built (nvcc $(NVCC); plugin plumb-cuda.so),not built (nvcc not found or not working))"
	@echo "plumb: cuDNN convolutions: $(if $(filter 1,$(HAVE_CUDNN)),built,not built (cudnn.h/libcudnn not found))"
	@echo "plumb: NCCL transport: $(if $(filter $(BUILD)/plumb-nccl.so,$(PLUGINS)),built (plugin plumb-nccl.so),not built ($(if $(filter 1,$(HAVE_NCCL)),needs MPI too,nccl.h/libnccl not found)))"
	@echo "plumb: MPI transport: $(if $(filter 1,$(HAVE_MPI)),built (plugin plumb-mpi.so),not built (mpicc not found; apt-get install libopenmpi-dev))"

$(BUILD)/obj/%.o: %.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# the plugins' objects are position-independent
$(BUILD)/obj/exec/mpi/%.o: exec/mpi/%.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC $(MPI_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/exec/cuda/%.o: exec/cuda/%.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/obj/pic/%.o: %.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(CONFIG)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fPIC -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

# Each plugin links all it needs (-z defs: no symbol left for the binary to supply) and is
# named by its file name (its soname), under which plumb-nccl.so finds the other two next
# to itself ($ORIGIN).
PLUGIN_LD = $(CC) $(CFLAGS) $(LDSAN) -shared -Wl,-z,defs -Wl,-soname,$(notdir $@) -o $@

$(BUILD)/plumb-cuda.so: $(CUDA_PLUGIN_OBJS) $(PIC_ERR) $(CONFIG)
	$(PLUGIN_LD) $(filter %.o,$^) $(CUDA_LIBS) -lpthread -lm

$(BUILD)/plumb-mpi.so: $(MPI_PLUGIN_OBJS) $(PIC_ERR) $(CONFIG)
	$(PLUGIN_LD) $(filter %.o,$^) $(MPI_LIBS) -lpthread

$(BUILD)/plumb-nccl.so: $(NCCL_PLUGIN_OBJS) $(PIC_ERR) $(BUILD)/plumb-cuda.so $(BUILD)/plumb-mpi.so $(CONFIG)
	$(PLUGIN_LD) $(filter %.o,$^) -L$(BUILD) -l:plumb-cuda.so -l:plumb-mpi.so \
	    -Wl,-rpath,'$$ORIGIN' $(NCCL_LIBS) $(MPI_LIBS) -lpthread

# `make build/plumb` (bench/gpu-check.sh) builds the plugins too
$(BIN): $(BUILD)/obj/cli/main.o $(LIB) $(CONFIG) | $(PLUGINS)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $< $(LIB) $(LDLIBS)

ifeq ($(HAVE_CUDA),1) # the CUDA backend's tests call it directly: its objects are linked in
$(BUILD)/tests/test_cuda: tests/test_cuda.c $(CUDA_PLUGIN_OBJS) $(NCCL_CUDA_OBJS) $(LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDSAN) -o $@ $< $(CUDA_PLUGIN_OBJS) $(NCCL_CUDA_OBJS) $(LIB) -lcriterion \
	    $(LDLIBS) $(CUDA_LIBS) $(if $(NCCL_LIBS),-lnccl)
endif

$(BUILD)/tests/%: tests/%.c $(LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDSAN) -o $@ $< $(LIB) -lcriterion $(LDLIBS)

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDSAN) -o $@ $< tests/fuzz/replay.c $(LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDSAN) -o $@ $< $(LIB) $(LDLIBS)

# Tests: every Criterion suite, then every end-to-end script; non-zero on any failure.
test: all $(TEST_BINS) $(TEST_EXTRA)
	@PLUMB_BUILD=$(BUILD) scripts/run-tests.sh $(TEST_BINS)

test-long: all $(TEST_BINS) $(TEST_EXTRA)
	@PLUMB_BUILD=$(BUILD) PLUMB_LONG=1 scripts/run-tests.sh $(TEST_BINS)

demo: all
	@scripts/demo.sh $(BIN)

bench: all $(BENCH_BINS)
	@PLUMB_BUILD=$(BUILD) scripts/bench.sh

fuzz:
	@scripts/fuzz.sh

# Debian packages for an offline GPU machine (bench/gpu-check.sh unpacks them there).
gpu-bundle:
	@scripts/gpu-bundle.sh

clean:
	rm -rf build build-* plumb libplumb.a plumb-cuda.so plumb-mpi.so plumb-nccl.so

-include $(shell find $(BUILD)/obj $(BUILD)/tests $(BUILD)/fuzz $(BUILD)/bench -name '*.d' 2>/dev/null)
