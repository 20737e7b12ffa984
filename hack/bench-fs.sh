#!/usr/bin/env bash
# Makes a zstd-compressed btrfs filesystem in a sparse loop file, for the
# benchmark's steady state at ten thousand Databases: every PostgreSQL
# database is a copy of template1 (about 7.5 MiB), so 10,000 of them take
# about 75 GiB on a plain filesystem and about a third of that compressed.
# Needs root, a loop device and btrfs-progs (apt-get install btrfs-progs).
#
#   sudo hack/bench-fs.sh [DIR [SIZE]]     # default /var/tmp/ppt-bench, 60G
#   go run ./test/bench -steady-n 10000 -steady-tmpdir /var/tmp/ppt-bench/tmp ...
#   sudo hack/bench-fs.sh --remove [DIR]   # unmount and delete it
set -euo pipefail

if [[ ${1:-} == --remove ]]; then
	dir=${2:-/var/tmp/ppt-bench}
	umount "$dir" 2>/dev/null || true
	rm -f "$dir.img"
	rmdir "$dir" 2>/dev/null || true
	exit 0
fi
dir=${1:-/var/tmp/ppt-bench}
size=${2:-60G}
if [[ $(id -u) != 0 ]]; then
	echo "bench-fs: needs root (a loop mount)" >&2
	exit 1
fi
command -v mkfs.btrfs >/dev/null || { echo "bench-fs: mkfs.btrfs missing: apt-get install btrfs-progs" >&2; exit 1; }
if ! mountpoint -q "$dir"; then
	mkdir -p "$dir"
	truncate -s "$size" "$dir.img"
	mkfs.btrfs -q -f "$dir.img" >/dev/null
	mount -o loop,compress=zstd:1,noatime "$dir.img" "$dir"
fi
# World-writable with the sticky bit, like /tmp: the test PostgreSQL runs
# as the postgres user.
mkdir -p "$dir/tmp"
chmod 1777 "$dir/tmp"
echo "-steady-tmpdir $dir/tmp"
