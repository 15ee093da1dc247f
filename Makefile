# realpos build.
#   make            build realpos and the test programs (needs the libraries below)
#   make deps       install what is missing (scripts/setup.sh: Debian packages via apt-get)
#   make test       deps + build + the test suite (the README's test command)
#   make test-kernels  the C and parity tests under each OpenBLAS kernel set and at one thread
#   make pretrain   deps + build + the default pretraining run (the README's main command);
#                   PRETRAIN_ARGS="--set train.max_steps=20 ..." shortens it
#   make NATIVE=1   tune for this CPU (-march=native); the default -march is portable (x86-64-v3)
# Nothing here runs apt while make reads this file: only the `deps` target does.
PKGS     := hdf5 inih libcjson libutf8proc openblas ompi-c zlib libzstd # ompi-c: OpenMPI (optim/dist.c); zlib, libzstd: compressed corpora
DNNL_LIBS := -ldnnl # oneDNN (core/gemm.c, bf16 products): no pkg-config file, found by its header

CC       ?= gcc
ARCH     ?= $(if $(NATIVE),native,x86-64-v3)
OPT      ?= -O3 -march=$(ARCH) -ffp-contract=fast
# Recursive (=) so that pkg-config runs when a recipe needs the flags, after `deps` installed it.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
CFLAGS   = -std=c11 -D_GNU_SOURCE -I. $(OPT) -fno-math-errno -fopenmp -Wall -Wextra -Werror -g \
           $(PKG_CFLAGS) $(CLANG_CFLAGS) $(EXTRA_CFLAGS)
# clang reports an `omp simd` loop it leaves scalar (one with a call it cannot vectorise) as a
# warning, an error under -Werror: the loop is correct either way.
CLANG_CFLAGS = $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),-Wno-pass-failed)
LDLIBS   = $(PKG_LIBS) $(DNNL_LIBS) -fopenmp -lm $(EXTRA_LDLIBS)

BUILD    := build
LIB_SRC  := $(filter-out train/cli/main.c,$(wildcard core/*.c core/*/*.c layers/*.c optim/*.c train/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(shell find tests -path tests/fuzz -prune -o -name 'test_*.c' -print | sort)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
DEPS     := $(BUILD)/.deps-installed

.PHONY: all deps libcheck test test-long test-kernels bench pretrain clean
all: realpos $(TEST_BIN)

# The libraries must be findable by pkg-config (any distribution); on Debian `make deps` installs them.
libcheck:
	@pkg-config --exists $(PKGS) || { echo "realpos: missing libraries:" \
	  "$$(for p in $(PKGS); do pkg-config --exists $$p || printf '%s ' $$p; done)" \
	  "(pkg-config names); run 'make deps' (Debian) or install them" >&2; exit 1; }
	@echo '#include <oneapi/dnnl/dnnl.h>' | $(CC) -E -x c - >/dev/null 2>&1 || { echo "realpos: missing" \
	  "oneDNN (oneapi/dnnl/dnnl.h); run 'make deps' (Debian: libdnnl-dev) or install it" >&2; exit 1; }

$(BUILD)/%.o: %.c | libcheck
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# Rebuilt from scratch: `ar r` keeps members whose source was moved or deleted, and a stale
# member can win the link.
$(BUILD)/librealpos.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# `realpos --version` names the commit it was built from; main.o is rebuilt when that changes
# (the stamp file is rewritten only when its content differs).
GIT_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/git-commit: FORCE
	@mkdir -p $(dir $@); echo '$(GIT_COMMIT)' | cmp -s - $@ || echo '$(GIT_COMMIT)' >$@
$(BUILD)/train/cli/main.o $(SAN_BUILD)/train/cli/main.o: $(BUILD)/git-commit
$(BUILD)/train/cli/main.o $(SAN_BUILD)/train/cli/main.o: CFLAGS += -DREALPOS_GIT_COMMIT='"$(GIT_COMMIT)"'
.PHONY: FORCE

realpos: $(BUILD)/train/cli/main.o $(BUILD)/librealpos.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# AdamW's update spells out its fused multiply-adds (fmaf) and rounds every other product, in both of
# its compiled forms (optim/adamw.c): no contraction of its own for GCC to choose differently per form.
$(BUILD)/optim/adamw.o: CFLAGS += -ffp-contract=off

# test_step counts the parallel regions a step opens inside another (its __wrap_GOMP_parallel)
$(BUILD)/tests/train/loop/test_step: LDLIBS += -Wl,--wrap=GOMP_parallel

$(BUILD)/tests/%: tests/%.c $(BUILD)/librealpos.a tests/check.h | libcheck
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/librealpos.a $(LDLIBS)

deps: $(DEPS)
$(DEPS): scripts/setup.sh
	bash scripts/setup.sh
	@mkdir -p $(dir $@) && touch $@

# The README's commands install what is missing first, then build (a sub-make, so that the build
# starts only after the libraries are there, also under -j).
test: $(DEPS)
	$(MAKE) all
	bash tests/run.sh

test-long: $(DEPS)
	$(MAKE) all
	RP_TEST_LONG=1 bash tests/run.sh

# The C tests and the parity tests under OPENBLAS_CORETYPE unset, Haswell and Prescott, and the C
# tests at one thread: no verdict may depend on the kernels or the thread count (tests/kernels.sh).
test-kernels: $(DEPS)
	$(MAKE) all
	bash tests/kernels.sh

bench: $(DEPS)
	$(MAKE) all
	bash scripts/dev/bench.sh

pretrain: $(DEPS)
	$(MAKE) realpos
	bash scripts/pretrain_default.sh $(PRETRAIN_ARGS)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD) realpos

# ---- sanitizers and fuzzing (docs/sanitize.md) --------------------------------------------------
# `make sanitize`: the library, the C tests and realpos built with gcc's AddressSanitizer and
# UndefinedBehaviorSanitizer into build-san/, then tests/sanitize.sh (0 reports or it fails).
# `make fuzz`: libFuzzer harnesses (tests/fuzz/) built with clang into build-fuzz/, each run for
# FUZZ_SECONDS. The harnesses' regression inputs are replayed by `make test` without clang.
SAN_BUILD    := build-san
SAN_FLAGS    := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_CFLAGS    = $(filter-out $(OPT),$(CFLAGS)) -O1 -march=$(ARCH) $(SAN_FLAGS)
SAN_LIB_OBJ  := $(LIB_SRC:%.c=$(SAN_BUILD)/%.o)
SAN_TEST_BIN := $(TEST_SRC:tests/%.c=$(SAN_BUILD)/tests/%)

FUZZ_BUILD   := build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_CFLAGS   = $(filter-out $(OPT) -fopenmp -Werror,$(CFLAGS)) -O1 -march=$(ARCH) -fopenmp=libgomp \
                -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer -Wno-unknown-warning-option
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
# gcc builds of the harnesses with a main() that replays files (tests/fuzz/replay.c), for make test
REPLAY_BIN   := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)
FUZZ_WRAP    := -Wl,--wrap=exit,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign

.PHONY: sanitize fuzz fuzz-build fuzz-cc
all: $(REPLAY_BIN)

$(SAN_BUILD)/%.o: %.c | libcheck
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -MMD -MP -c $< -o $@

$(SAN_BUILD)/librealpos.a: $(SAN_LIB_OBJ)
	ar rcs $@ $^

$(SAN_BUILD)/realpos: $(SAN_BUILD)/train/cli/main.o $(SAN_BUILD)/librealpos.a
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(LDLIBS)

$(SAN_BUILD)/tests/train/loop/test_step: LDLIBS += -Wl,--wrap=GOMP_parallel

$(SAN_BUILD)/tests/%: tests/%.c $(SAN_BUILD)/librealpos.a tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -MMD -MP -o $@ $< $(SAN_BUILD)/librealpos.a $(LDLIBS)

$(SAN_BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/support.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(SAN_BUILD)/librealpos.a
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) $(FUZZ_WRAP) -o $@ $(filter %.c,$^) $(SAN_BUILD)/librealpos.a $(LDLIBS)

sanitize: $(SAN_BUILD)/realpos $(SAN_TEST_BIN) $(FUZZ_TARGETS:%=$(SAN_BUILD)/fuzz/replay_%)
	bash tests/sanitize.sh $(SAN_BUILD)

$(FUZZ_BUILD)/%.o: %.c | libcheck fuzz-cc
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/librealpos.a: $(FUZZ_LIB_OBJ)
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_BUILD)/tests/fuzz/support.o $(FUZZ_BUILD)/librealpos.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_WRAP) -o $@ $^ $(filter-out -fopenmp,$(LDLIBS)) -fopenmp=libgomp

fuzz-cc:
	@echo 'int main(void) { return 0; }' | $(FUZZ_CC) -x c -fsanitize=fuzzer-no-link,address -o /dev/null - 2>/dev/null || \
	  { echo "make fuzz needs clang with libFuzzer ($(FUZZ_CC); Debian: clang libclang-rt-14-dev)" >&2; exit 1; }

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/support.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(BUILD)/librealpos.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(FUZZ_WRAP) -o $@ $(filter %.c,$^) $(BUILD)/librealpos.a $(LDLIBS)

-include $(shell find $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
