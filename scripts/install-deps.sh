#!/bin/sh
# Installs the Debian packages in scripts/debian-packages.txt, once.
# Idempotent and fast: when every package is installed it runs no apt at all.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pkgs=$(grep -v '^#' "$here/debian-packages.txt" | tr '\n' ' ')
missing=""
for p in $pkgs; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -z "$missing" ]; then
  exit 0
fi
echo "install-deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: need root to apt-get install:$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
