# realpos build. `make test` on a fresh Debian 12 machine installs dependencies (scripts/setup.sh),
# builds and runs the test suite.
PKGS     := hdf5 inih libcjson libutf8proc openblas
# scripts/setup.sh installs whatever Debian package is missing (C libraries, and python3-torch,
# h5py, numpy, matplotlib and tcmalloc for the reference and plots); it is quiet and fast when
# everything is present, so every make runs it.
ifneq ($(shell bash scripts/setup.sh --quiet >&2 && echo ok),ok)
  $(error scripts/setup.sh failed; run it by hand to see why)
endif

CC       ?= gcc
OPT      ?= -O3 -march=native -ffp-contract=fast
CFLAGS   := -std=c11 -D_GNU_SOURCE -I. $(OPT) -fno-math-errno -fopenmp -Wall -Wextra -Werror -g \
            $(shell pkg-config --cflags $(PKGS))
LDLIBS   := $(shell pkg-config --libs $(PKGS)) -fopenmp -lm

BUILD    := build
LIB_SRC  := $(filter-out train/cli/main.c,$(wildcard core/*.c layers/*.c optim/*.c train/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test test-long bench pretrain clean
all: realpos $(TEST_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/librealpos.a: $(LIB_OBJ)
	ar rcs $@ $^

realpos: $(BUILD)/train/cli/main.o $(BUILD)/librealpos.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/librealpos.a tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(BUILD)/librealpos.a $(LDLIBS)

test: all
	bash tests/run.sh

test-long: all
	RP_TEST_LONG=1 bash tests/run.sh

bench: all
	bash scripts/bench.sh

pretrain: realpos
	bash scripts/pretrain_default.sh

clean:
	rm -rf $(BUILD) realpos

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
