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
#   libplumb-emu.a  libplumb's other objects from the normal build, plus the above and cuemu
#   plumb           the plumb binary on cuemu (`--backend cuda` runs on the CPU)
# and $(BUILD)/tests/test_cuda_emu (tests/test_cuda.c linked against it) and
# $(BUILD)/tests/test_cuemu (cuemu's own tests, tests/cuemu/test_cuemu.cu).

EMU := $(BUILD)/emu
CXX ?= g++
EMU_CXXFLAGS := -std=c++17 -O2 -g -Wall -Wextra -Werror -I. -Icore -Itests/cuemu -I$(CUDA_HOME)/include
ifeq ($(SAN),1)
  EMU_CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
EMU_CFLAGS := $(CFLAGS) -DPLUMB_HAVE_CUDNN -DPLUMB_CUEMU
EMU_LDLIBS := $(filter-out -lcublas -lcudart -lcudnn -lnccl,$(LDLIBS)) -lstdc++

EMU_RT_SRCS := $(wildcard tests/cuemu/cuemu_*.cc)
ifneq ($(HAVE_NCCL),1) # no nccl.h: the emulated build has no NCCL either
  EMU_RT_SRCS := $(filter-out tests/cuemu/cuemu_nccl.cc,$(EMU_RT_SRCS))
endif
EMU_RT_OBJS := $(EMU_RT_SRCS:tests/cuemu/%.cc=$(EMU)/rt/%.o)
EMU_KERNEL_OBJS := $(CUDA_SRCS:exec/cuda/%.cu=$(EMU)/kernels/%.o)
# the C files that call CUDA libraries or NCCL directly, compiled again for cuemu
EMU_CSRCS := $(CUDA_CSRCS) $(if $(LIB_OBJS_MPI),$(wildcard exec/mpi/nccl_*.c))
EMU_C_OBJS := $(EMU_CSRCS:%.c=$(EMU)/obj/%.o)
EMU_LIB_OBJS := $(filter-out $(EMU_CSRCS:%.c=$(BUILD)/obj/%.o) $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.o),$(LIB_OBJS)) \
                $(EMU_C_OBJS) $(EMU_KERNEL_OBJS) $(EMU_RT_OBJS)
EMU_LIB := $(EMU)/libplumb-emu.a
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

$(EMU_LIB): $(EMU_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(EMU_BIN): $(BUILD)/obj/cli/main.o $(EMU_LIB) $(CONFIG)
	$(CC) $(CFLAGS) $(LDSAN) -o $@ $< $(EMU_LIB) $(EMU_LDLIBS)

$(EMU_TEST): tests/test_cuda.c $(EMU_LIB) $(CONFIG)
	@mkdir -p $(dir $@)
	$(CC) $(EMU_CFLAGS) $(LDSAN) -o $@ $< $(EMU_LIB) -lcriterion $(EMU_LDLIBS)

$(EMU_SELFTEST): $(EMU)/tests/test_cuemu.o $(EMU_RT_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $^ -lcriterion -lpthread

.PRECIOUS: $(EMU)/kernels/%.cc $(EMU)/tests/%.cc

.PHONY: cuemu
cuemu: $(EMU_BIN) $(EMU_TEST) $(EMU_SELFTEST)

-include $(shell find $(EMU) -name '*.d' 2>/dev/null)
