#!/usr/bin/env bash
# Installs Tern's build and test dependencies from Debian packages.
# Idempotent: does nothing (and needs no network) when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev libpcre2-dev
  libutf8proc-dev libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev liburing-dev
  python3 python3-numpy python3-torch libopenblas0-pthread nodejs npm
  clang libclang-rt-14-dev chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    # nodejs/npm may come from outside Debian (e.g. nvm); accept a working binary.
    case "$p" in
      nodejs) command -v node >/dev/null 2>&1 && continue ;;
      npm) command -v npm >/dev/null 2>&1 && continue ;;
    esac
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
