#!/usr/bin/env bash
# Installs what phoenix needs to build, test and run its benchmarks, from Debian 12's packages.
# As root it runs apt-get; otherwise it prints the exact command to run and exits non-zero.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config                  # toolchain
  libasio-dev libspdlog-dev libfmt-dev libssl-dev    # runtime: standalone Asio, logging, HMAC/RAND
  libtoml11-dev libssh2-1-dev                        # configuration files; SSH links
  libpng-dev                                         # PNG output of the ray tracer (apps/raytrace/)
  doctest-dev                                        # tests
  libcli11-dev                                       # command lines of the apps
  libedit-dev graphviz                               # the shell phsh: line editing; its `dot --png`
  libxxhash-dev                                      # Volpex: the hash that places tags on virtual nodes
  libopenblas-dev liblapacke-dev                     # block updates and panel factorisation of apps/lu
  clang libclang-rt-14-dev                           # libFuzzer harnesses and sanitizer runtimes
  openssh-server openssh-client                      # ssh:// link tests run a private sshd
  openmpi-bin libopenmpi-dev                         # the Open MPI anchor of the benchmarks
  libscalapack-openmpi-dev                           # ScaLAPACK's pdgetrf, the anchor of the LU benchmark
  iproute2                                           # `ss -K` to cut live connections in tests; `ip netns`
  nftables                                           # the firewall of the network-namespace test (tests/netns/)
  spin                                               # model checking the migration protocol (spin-models/)
  gnuplot-nox                                        # scripts/figure6.sh draws the Figure-6 picture
  dpkg-dev                                           # cpack -G DEB: the package's library dependencies
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root:  $cmd" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
