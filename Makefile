# q35 — build with `make`, test with `make test`.
# Plain GNU make: every src/**/*.c except src/cli goes into libq35; src/cli/*.c into build/q35;
# every tests/test_*.c becomes build/tests/<name> linked against libq35.a.
CC      ?= cc
BUILD   ?= build
PKGS    := libpcre2-8 libcjson libutf8proc
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
# gcc warns about snprintf truncation we bound on purpose; clang has no such flag.
NO_TRUNC := $(shell $(CC) -Werror -Wno-format-truncation -E -x c /dev/null >/dev/null 2>&1 && echo -Wno-format-truncation)
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter $(NO_TRUNC)
CPPFLAGS := -D_GNU_SOURCE -Iinclude -Isrc $(PKG_CFLAGS)
ALLCFLAGS = $(WARN) $(CPPFLAGS) $(CFLAGS) -fPIC -MMD -MP
LDLIBS  := $(PKG_LIBS) -lm -lpthread

# SIMD kernels live in *_avx2.c, *_avx512.c, *_neon.c siblings, each compiled with its own flags;
# the library picks one at run time from the CPU's features (src/kernels/dispatch.c).
ARCH := $(shell $(CC) -dumpmachine)
ifneq (,$(findstring x86_64,$(ARCH)))
SIMD_EXCLUDE := -not -name '*_neon.c'
else ifneq (,$(findstring aarch64,$(ARCH)))
SIMD_EXCLUDE := -not -name '*_avx2.c' -not -name '*_avx512.c'
else
SIMD_EXCLUDE := -not -name '*_avx2.c' -not -name '*_avx512.c' -not -name '*_neon.c'
endif
FLAGS_AVX2   := -mavx2 -mfma -mf16c
FLAGS_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mavx2 -mfma -mf16c
FLAGS_NEON   := -march=armv8.2-a+dotprod+fp16

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
	$(CC) $(ALLCFLAGS) $(FLAGS_AVX2) -c $< -o $@
$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(FLAGS_AVX512) -c $< -o $@
$(BUILD)/obj/%_neon.o: %_neon.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(FLAGS_NEON) -c $< -o $@

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

clean:
	rm -rf build build-asan build-fuzz

.PHONY: all test test-asan fuzz clean
-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_SRC:tests/%.c=$(BUILD)/obj/tests/%.d)
