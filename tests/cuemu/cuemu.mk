# cuemu.mk: builds the CUDA backend against cuemu, the CPU emulator of the CUDA runtime,
# cuBLAS, cuDNN and NCCL (tests/cuemu/), so CI runs the backend's code and kernels, and the
# nccl transport under mpirun, without a GPU.
# Included by the Makefile when nvcc works (the CUDA headers give the API's types).
#
# What it builds, under $(BUILD)/emu/:
#   kernels/*.o     exec/cuda/*.cu compiled by the host C++ compiler: each `k<<<...>>>(`
#                   launch is rewritten to CUEMU_LAUNCH(k, ...)( (and the build fails if a
#                   launch is left over), with tests/cuemu/cuemu_kernel.h force-included
#   obj/exec/       the backend's C files and the NCCL transport's, as the normal build
#                   compiles them, with cuDNN, and with NCCL when the normal build has it
#                   (cuemu_nccl.cc, communicators between processes through files)
#   plumb           the plumb binary (a copy of $(BUILD)/plumb: it has no CUDA in it), next
#                   to the emulated plugins, so that `--backend cuda` runs on the CPU:
#   plumb-cuda.so   the CUDA backend linked with cuemu's runtime, cuBLAS and cuDNN
#   plumb-nccl.so   the nccl transport linked with cuemu's NCCL (when NCCL and MPI are found)
#   plumb-mpi.so    a copy of $(BUILD)/plumb-mpi.so (which plumb-nccl.so links)
# and $(BUILD)/tests/test_cuda_emu (tests/test_cuda.c linked with the emulated backend's
# objects) and $(BUILD)/tests/test_cuemu (cuemu's own tests, tests/cuemu/test_cuemu.cu).

EMU := $(BUILD)/emu
CXX ?= g++
EMU_CXXFLAGS := -std=c++17 -O2 -g -Wall -Wextra -Werror -fPIC -I. -Icore -Itests/cuemu -I$(CUDA_HOME)/include
ifeq ($(SAN),1)
  EMU_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
EMU_CFLAGS := $(CFLAGS) -fPIC -DPLUMB_HAVE_CUDNN -DPLUMB_CUEMU

# cuemu's runtime, cuBLAS and cuDNN go with the backend; its NCCL with the nccl transport
EMU_RT_OBJS := $(patsubst tests/cuemu/%.cc,$(EMU)/rt/%.o,$(filter-out tests/cuemu/cuemu_nccl.cc,$(wildcard tests/cuemu/cuemu_*.cc)))
EMU_NCCL_RT := $(if $(filter 1,$(HAVE_NCCL)),$(EMU)/rt/cuemu_nccl.o)
EMU_KERNEL_OBJS := $(CUDA_SRCS:exec/cuda/%.cu=$(EMU)/kernels/%.o)
EMU_CUDA_OBJS := $(CUDA_PLUGIN_SRCS:%.c=$(EMU)/obj/%.o) $(EMU_KERNEL_OBJS) $(EMU_RT_OBJS)
EMU_NCCL_OBJS := $(NCCL_PLUGIN_SRCS:%.c=$(EMU)/obj/%.o) $(EMU_NCCL_RT)
# the C files that call CUDA libraries or NCCL directly, compiled again for cuemu
EMU_C_OBJS := $(CUDA_CSRCS:%.c=$(EMU)/obj/%.o) $(filter $(EMU)/obj/exec/mpi/%,$(EMU_NCCL_OBJS))
# test_cuda_emu: the backend and the NCCL layer's CUDA side
EMU_TEST_OBJS := $(EMU_CUDA_OBJS) $(filter $(EMU)/obj/exec/cuda/%,$(EMU_NCCL_OBJS)) $(EMU_NCCL_RT)
EMU_PLUGINS := $(EMU)/plumb-cuda.so $(if $(filter $(BUILD)/plumb-nccl.so,$(PLUGINS)),$(EMU)/plumb-mpi.so $(EMU)/plumb-nccl.so)
EMU_BIN := $(EMU)/plumb
EMU_TEST := $(BUILD)/tests/test_cuda_emu
EMU_SELFTEST := $(BUILD)/tests/test_cuemu

$(EMU)/rt/%.o: tests/cuemu/%.cc tests/cuemu/cuemu.h tests/cuemu/cuemu_kernel.h $(CONFIG)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

# .cu to host C++: every launch rewritten, the file's own name kept for messages
define emu_rewrite
	@mkdir -p $(dir $@)
	@{ echo '#line 1 "$<"'; sed -E 's/([A-Za-z_][A-Za-z0-9_]*)<<<(.*)>>>\(/CUEMU_LAUNCH(\1, \2)(/' $<; } > $@.tmp
	@if grep -n '<<<\|>>>' $@.tmp; then echo "cuemu.mk: $<: a kernel launch the rewrite missed (keep each <<<...>>>( on one line)"; rm -f $@.tmp; exit 1; fi
	@mv $@.tmp $@
endef

$(EMU)/kernels/%.cc: exec/cuda/%.cu
	$(emu_rewrite)

$(EMU)/tests/%.cc: tests/cuemu/%.cu
	$(emu_rewrite)

$(EMU)/%.o: $(EMU)/%.cc tests/cuemu/cuemu_kernel.h $(CONFIG)
	$(CXX) $(EMU_CXXFLAGS) -MMD -MP -include tests/cuemu/cuemu_kernel.h -c $< -o $@

$(EMU)/obj/%.o: %.c $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(EMU_CFLAGS) $(MPI_CFLAGS) -MMD -MP -c $< -o $@

# their flags are set here: a change of them (NCCL on) recompiles them
$(EMU_C_OBJS): tests/cuemu/cuemu.mk

$(EMU)/plumb-cuda.so: $(EMU_CUDA_OBJS) $(PIC_ERR) $(CONFIG)
	$(PLUGIN_LD) $(filter %.o,$^) -lstdc++ -lpthread -lm

$(EMU)/plumb-mpi.so: $(BUILD)/plumb-mpi.so
	cp -f $< $@

$(EMU)/plumb-nccl.so: $(EMU_NCCL_OBJS) $(PIC_ERR) $(EMU)/plumb-cuda.so $(EMU)/plumb-mpi.so $(CONFIG)
	$(PLUGIN_LD) $(filter %.o,$^) -L$(EMU) -l:plumb-cuda.so -l:plumb-mpi.so \
	    -Wl,-rpath,'$$ORIGIN' $(MPI_LIBS) -lstdc++ -lpthread

$(EMU_BIN): $(BIN) | $(EMU_PLUGINS)
	cp -f $< $@

$(EMU_TEST): tests/test_cuda.c $(EMU_TEST_OBJS) $(LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(EMU_CFLAGS) $(LDSAN) -o $@ $< $(EMU_TEST_OBJS) $(LIB) -lcriterion $(LDLIBS) -lstdc++

$(EMU_SELFTEST): $(EMU)/tests/test_cuemu.o $(EMU_RT_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $^ -lcriterion -lpthread

.PRECIOUS: $(EMU)/kernels/%.cc $(EMU)/tests/%.cc

.PHONY: cuemu
cuemu: $(EMU_BIN) $(EMU_TEST) $(EMU_SELFTEST)

-include $(shell find $(EMU) -name '*.d' 2>/dev/null)
