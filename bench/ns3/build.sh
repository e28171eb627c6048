#!/usr/bin/env bash
# Build the ns-3 reference scenario for ccbench's simulator speed benchmark.
#   bench/ns3/build.sh            -> bench/out/ns3-dumbbell
# Needs Debian's ns-3 (3.37):  apt-get install -y ns3 libns3-dev pkg-config g++
# ns-3 is only a bench/ dependency, never a ccbench runtime dependency.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="$(cd "$here/.." && pwd)/out"
out="$out_dir/ns3-dumbbell"
mods="ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control"
CXX="${CXX:-g++}"

die() { echo "build.sh: $*" >&2; exit 1; }

command -v pkg-config >/dev/null 2>&1 ||
    die "pkg-config not found; install it: apt-get install -y pkg-config"
command -v "$CXX" >/dev/null 2>&1 || die "C++ compiler '$CXX' not found (apt-get install -y g++)"
# shellcheck disable=SC2086
pkg-config --exists $mods ||
    die "ns-3 development files not found (pkg-config: $mods); install them: apt-get install -y ns3 libns3-dev pkg-config"
inc="$(pkg-config --variable=includedir ns3-core)"
[ -f "${inc:-/usr/include}/ns3/core-module.h" ] ||
    die "ns-3 headers not found (${inc:-/usr/include}/ns3/core-module.h); apt-get install -y libns3-dev"

# Debian 3.37's .pc files carry a stray "-I/usr;" token (escaped by pkg-config
# as "-I/usr\;"); drop anything that is not a plain flag.
cflags=""
# shellcheck disable=SC2086
for f in $(pkg-config --cflags $mods); do
    case "$f" in *\;*|*\\*) continue ;; esac
    cflags="$cflags $f"
done
# The .pc files also name libgsl.so/libsqlite3.so by absolute path; those
# development symlinks exist only with libgsl-dev/libsqlite3-dev. The ns-3
# shared libraries already link them, so drop any such path that is missing.
libs=""
# shellcheck disable=SC2086
for f in $(pkg-config --libs $mods); do
    case "$f" in /*) [ -e "$f" ] || continue ;; esac
    case " $libs " in *" $f "*) continue ;; esac   # de-duplicate -lns3-core ...
    libs="$libs $f"
done

mkdir -p "$out_dir"
echo "build.sh: ns-3 $(pkg-config --modversion ns3-core), $CXX -O2 -> $out" >&2
# shellcheck disable=SC2086
"$CXX" -std=c++17 -O2 -Wall -o "$out" "$here/dumbbell.cc" $cflags $libs
echo "$out"
