# ccbench: the two commands are `make run` and `make test` (see README.md).
# Each installs what is missing first, so both work on a fresh Debian machine.

PYTHON ?= python3
PIP    := $(PYTHON) -m pip
STAMP  := .make-stamps

.PHONY: run test install install-dev rust-test py-test bench bench-cluster clean

run: install
	$(PYTHON) -m ccbench run studies/quickstart.toml

test: install-dev rust-test py-test

rust-test: $(STAMP)/toolchain
	cargo test --workspace --exclude ccbench-core

py-test: install-dev
	$(PYTHON) -m pytest -q

# The toolchain: Rust (cargo) and a C linker; Debian's packages when absent.
$(STAMP)/toolchain:
	@mkdir -p $(STAMP)
	@command -v cargo >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 || { \
	  echo "installing the Rust toolchain and a C compiler from Debian"; \
	  apt-get update && apt-get install -y cargo rustc build-essential; }
	@touch $@

# The package itself: `pip install` builds the Rust core with maturin.
install: $(STAMP)/toolchain
	$(PIP) install --quiet --disable-pip-version-check -e .

install-dev: $(STAMP)/toolchain
	$(PIP) install --quiet --disable-pip-version-check -e '.[dev,cluster]'
	@command -v ip >/dev/null 2>&1 || { \
	  echo "installing iproute2 (the linux backend builds namespaces with ip)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y iproute2; }
	@command -v iperf3 >/dev/null 2>&1 || { \
	  echo "installing iperf3 (the linux backend's tool = \"iperf3\" flows; tested)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y iperf3; }
	@command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 || { \
	  echo "installing Debian's slurm-wlm and munge (the --cluster slurm test starts a one-node Slurm)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge; }
	@{ command -v clang >/dev/null 2>&1 && command -v bpftool >/dev/null 2>&1 && test -f /usr/include/bpf/bpf_helpers.h; } || { \
	  echo "installing clang, libbpf-dev and bpftool (cca = \"bpf:FILE\": BPF congestion control; tested)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y clang libbpf-dev bpftool; }
	@test -x /usr/sbin/sshd && command -v ssh >/dev/null 2>&1 || { \
	  echo "installing OpenSSH (the hosts backend's tests run sshd in namespaces; ccbench drives hosts with ssh)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openssh-server openssh-client; }
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium (the HTML report test renders the report in it)"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

bench: install
	$(PYTHON) bench/sim_speed.py

bench-cluster: install-dev
	$(PYTHON) bench/sweep_scale.py

clean:
	rm -rf $(STAMP) target build dist python/ccbench/*.so
