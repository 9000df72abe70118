# q35 — build with `make`, test with `make test`.
# Plain GNU make: every src/**/*.c except src/cli goes into libq35; src/cli/*.c into build/q35;
# every tests/test_*.c becomes build/tests/<name> linked against libq35.a.
CC      ?= cc
BUILD   ?= build
PKGS    := libpcre2-8 libcjson libutf8proc libpng libjpeg libexif zlib libcurl libcrypto
PKGS    += libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
# gcc warns about snprintf truncation we bound on purpose; clang has no such flag.
NO_TRUNC := $(shell $(CC) -Werror -Wno-format-truncation -E -x c /dev/null >/dev/null 2>&1 && echo -Wno-format-truncation)
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter $(NO_TRUNC)
CPPFLAGS := -D_GNU_SOURCE -Iinclude -Isrc $(PKG_CFLAGS)
ALLCFLAGS = $(WARN) $(CPPFLAGS) $(CFLAGS) -fPIC -MMD -MP
# SIMD kernels are not instrumented for fuzzing coverage (it makes clang take minutes per file and
# the fuzz targets exercise parsers, not products), nor, in the fuzz build, for ASan/UBSan: the
# sanitized suite (make test-asan) checks them. There they get every check but UBSan's
# pointer-overflow one, which alone made clang -O1 take 9-13 min on mm_avx512.c on this project's
# 2-core VM (ASan alone ~1 min, ASan + UBSan without pointer-overflow ~2 min; docs/speed.md).
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
ifneq (,$(findstring fuzzer-no-link,$(CFLAGS)))
SIMD_CFLAGS = $(filter-out -fsanitize=fuzzer-no-link $(SAN_FLAGS),$(ALLCFLAGS))
else ifneq (,$(findstring undefined,$(CFLAGS)))
SIMD_CFLAGS = $(ALLCFLAGS) -fno-sanitize=pointer-overflow
else
SIMD_CFLAGS = $(filter-out -fsanitize=fuzzer-no-link,$(ALLCFLAGS))
endif
LDLIBS  := $(PKG_LIBS) -lm -lpthread

# SIMD kernels live in *_avx2.c, *_avx512.c, *_amx.c, *_neon.c siblings, each compiled with its own flags;
# the library picks one at run time from the CPU's features (src/kernels/dispatch.c).
ARCH := $(shell $(CC) -dumpmachine)
ifneq (,$(findstring x86_64,$(ARCH)))
SIMD_EXCLUDE := -not -name '*_neon.c'
else ifneq (,$(findstring aarch64,$(ARCH)))
SIMD_EXCLUDE := -not -name '*_avx2.c' -not -name '*_avx512.c' -not -name '*_amx.c'
else
SIMD_EXCLUDE := -not -name '*_avx2.c' -not -name '*_avx512.c' -not -name '*_amx.c' -not -name '*_neon.c'
endif
FLAGS_AVX2   := -mavx2 -mfma -mf16c
FLAGS_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mavx2 -mfma -mf16c
FLAGS_AMX    := $(FLAGS_AVX512) -mamx-tile -mamx-int8
# GCC spills the plain AVX2 tiles' 16 registers unless its first scheduling pass weighs register
# pressure: +15-19% on the Q4_0/Q4_K products (docs/speed.md, "Clang builds"). clang refuses the flags.
SCHED_PRESSURE := $(shell echo 'int x;' | $(CC) -Werror -fschedule-insns -fsched-pressure -c -x c - -o /dev/null 2>/dev/null && echo -fschedule-insns -fsched-pressure)
$(BUILD)/obj/src/kernels/mm_avx2.o: FLAGS_AVX2 += $(SCHED_PRESSURE)
FLAGS_NEON   := -march=armv8-a
FLAGS_NEONDOT := -march=armv8.2-a+dotprod

LIB_SRC := $(sort $(shell find src -name '*.c' -not -path 'src/cli/*' $(SIMD_EXCLUDE)))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

all: $(BUILD)/q35 $(BUILD)/libq35.a $(BUILD)/libq35.so $(TEST_BIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -c $< -o $@
$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMD_CFLAGS) $(FLAGS_AVX2) -c $< -o $@
$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMD_CFLAGS) $(FLAGS_AVX512) -c $< -o $@
$(BUILD)/obj/%_amx.o: %_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMD_CFLAGS) $(FLAGS_AMX) -c $< -o $@
$(BUILD)/obj/%_neon.o: %_neon.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMD_CFLAGS) $(FLAGS_NEON) -c $< -o $@
$(BUILD)/obj/%_dot_neon.o: %_dot_neon.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMD_CFLAGS) $(FLAGS_NEONDOT) -c $< -o $@

# The AMX and AVX-VNNI kernels built a second time for tests/test_kernels only, to run on CPUs without
# those features (an AVX-512 CPU is enough): AMX over a software tile unit (src/kernels/amx_emu.h),
# AVX-VNNI with the AVX512-VNNI encodings of its two instructions (mm.h, q35_kern_emulate).
ifneq (,$(findstring x86_64,$(ARCH)))
EMU_OBJ := $(BUILD)/obj/emu/mm_amx.o $(BUILD)/obj/emu/mm_vnni_avx2.o
$(BUILD)/obj/emu/mm_amx.o: src/kernels/mm_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMD_CFLAGS) $(FLAGS_AVX512) -DQ35_AMX_EMU -c $< -o $@
$(BUILD)/obj/emu/mm_vnni_avx2.o: src/kernels/mm_vnni_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(SIMD_CFLAGS) $(FLAGS_AVX512) -DQ35_AVXVNNI_EVEX -c $< -o $@
endif
$(BUILD)/tests/test_kernels: $(BUILD)/obj/tests/test_kernels.o $(EMU_OBJ) $(BUILD)/libq35.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(EMU_OBJ) $(BUILD)/libq35.a $(LDLIBS)

$(BUILD)/libq35.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libq35.so: $(LIB_OBJ)
	$(CC) -shared $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/q35: $(CLI_OBJ) $(BUILD)/libq35.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libq35.a $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/libq35.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libq35.a $(LDLIBS)

# Runs every test binary and the CLI tests; ends with "N passed, N failed".
test: all
	@BUILD=$(BUILD) sh tests/run.sh

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan:
	$(MAKE) BUILD=build-asan CC=clang OPT=-O1 \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" test

# libFuzzer targets (clang), each run for FUZZ_SECONDS on its seed corpus.
FUZZ_SECONDS ?= 60
fuzz:
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS)

# Kernel throughput on the Qwen3.5-0.8B layer shapes: GB/s at n = 1, GFLOP/s at n = 64, per format,
# ISA and thread count (tests/bench_kernels.c; not part of `make test`).
$(BUILD)/bench_kernels: $(BUILD)/obj/tests/bench_kernels.o $(BUILD)/libq35.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libq35.a $(LDLIBS)
bench-kernels: $(BUILD)/bench_kernels

# NEON kernels on x86 hosts: tests/test_kernels.c and tests/test_gdn.c with the kernel sources (and
# the two layers test_gdn drives) only, cross-built for aarch64 (static) and run under qemu-user;
# test_kernels on qemu's default CPU (dotprod) and as a Cortex-A72 (none). Prints ok / not ok lines
# like the other tests.
# Needs Debian packages gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user.
NEON_CC   ?= aarch64-linux-gnu-gcc
NEON_AR   ?= aarch64-linux-gnu-ar
NEON_QEMU ?= qemu-aarch64
NEON_DIR  := $(BUILD)/neon
NEON_SRC  := $(sort $(filter-out %_avx2.c %_avx512.c %_amx.c,$(wildcard src/kernels/*.c)) src/core/pool.c src/core/err.c src/core/hugemem.c src/model/tensor.c \
             src/layers/gdn.c src/layers/attn.c)
NEON_OBJ  := $(NEON_SRC:%.c=$(NEON_DIR)/%.o)
$(NEON_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(NEON_CC) $(WARN) -D_GNU_SOURCE -Iinclude -Isrc -O2 -g $(if $(filter %_dot_neon.c,$<),$(FLAGS_NEONDOT),$(if $(filter %_neon.c,$<),$(FLAGS_NEON))) -MMD -MP -c $< -o $@
$(NEON_DIR)/libkernels.a: $(NEON_OBJ)
	@rm -f $@
	$(NEON_AR) rcs $@ $^
$(NEON_DIR)/test_%: $(NEON_DIR)/tests/test_%.o $(NEON_DIR)/libkernels.a
	$(NEON_CC) -static -o $@ $^ -lm -lpthread
test-neon: $(NEON_DIR)/test_kernels $(NEON_DIR)/test_gdn
	@Q35_EXPECT_NEONDOT=1 $(NEON_QEMU) $(NEON_DIR)/test_kernels
	@echo "# again on an emulated Cortex-A72 (no dot-product extension: the armv8-a table, and no sdot anywhere)"
	@Q35_EXPECT_NEONDOT=0 $(NEON_QEMU) -cpu cortex-a72 $(NEON_DIR)/test_kernels
	@$(NEON_QEMU) $(NEON_DIR)/test_gdn

clean:
	rm -rf build build-asan build-fuzz

.PHONY: all test test-asan fuzz clean bench-kernels test-neon
-include $(NEON_OBJ:.o=.d) $(NEON_DIR)/tests/test_kernels.d $(NEON_DIR)/tests/test_gdn.d
-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(EMU_OBJ:.o=.d) $(TEST_SRC:tests/%.c=$(BUILD)/obj/tests/%.d)
