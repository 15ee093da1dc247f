# realpos build.
#   make            build realpos and the test programs (needs the libraries below)
#   make deps       install what is missing (scripts/setup.sh: Debian packages via apt-get)
#   make test       deps + build + the test suite (the README's test command)
#   make pretrain   deps + build + the default pretraining run (the README's main command);
#                   PRETRAIN_ARGS="--set train.max_steps=20 ..." shortens it
#   make NATIVE=1   tune for this CPU (-march=native); the default -march is portable (x86-64-v3)
# Nothing here runs apt while make reads this file: only the `deps` target does.
PKGS     := hdf5 inih libcjson libutf8proc openblas

CC       ?= gcc
ARCH     ?= $(if $(NATIVE),native,x86-64-v3)
OPT      ?= -O3 -march=$(ARCH) -ffp-contract=fast
# Recursive (=) so that pkg-config runs when a recipe needs the flags, after `deps` installed it.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS))
CFLAGS   = -std=c11 -D_GNU_SOURCE -I. $(OPT) -fno-math-errno -fopenmp -Wall -Wextra -Werror -g \
           $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS   = $(PKG_LIBS) -fopenmp -lm $(EXTRA_LDLIBS)

BUILD    := build
LIB_SRC  := $(filter-out train/cli/main.c,$(wildcard core/*.c layers/*.c optim/*.c train/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
DEPS     := $(BUILD)/.deps-installed

.PHONY: all deps libcheck test test-long bench pretrain clean
all: realpos $(TEST_BIN)

# The libraries must be findable by pkg-config (any distribution); on Debian `make deps` installs them.
libcheck:
	@pkg-config --exists $(PKGS) || { echo "realpos: missing libraries:" \
	  "$$(for p in $(PKGS); do pkg-config --exists $$p || printf '%s ' $$p; done)" \
	  "(pkg-config names); run 'make deps' (Debian) or install them" >&2; exit 1; }

$(BUILD)/%.o: %.c | libcheck
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/librealpos.a: $(LIB_OBJ)
	ar rcs $@ $^

realpos: $(BUILD)/train/cli/main.o $(BUILD)/librealpos.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

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

bench: $(DEPS)
	$(MAKE) all
	bash scripts/bench.sh

pretrain: $(DEPS)
	$(MAKE) realpos
	bash scripts/pretrain_default.sh $(PRETRAIN_ARGS)

clean:
	rm -rf $(BUILD) realpos

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
