#!/usr/bin/env bash
# Makes the project's Python environment from scripts/python-requirements.txt:
# the PyPI torch wheel whose CUDA libtorch the CUDA flavour builds against
# (scripts/build.sh --cuda), plus test-time references.
#
# The environment is about 3 GB and takes minutes to install, so it is made
# once per machine, outside the clone: in $RLCORE_CACHE_DIR (default
# ~/.cache/rlcore) as venv-<hash of the torch pin and the interpreter>, and .venv
# in the clone is a link to it. A fresh clone on the same machine (CI) finds it
# ready. A changed requirements file is installed into the same environment
# (pip replaces the packages whose pins moved) unless the torch pin moved: the
# CUDA flavour compiles against the wheel's headers by this path, so keeping it
# keeps every object of that flavour in ccache. RLCORE_VENV=DIR installs into
# DIR instead, with no link.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=scripts/python-requirements.txt
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "[setup_python] error: no $python (apt-get install python3 python3-venv)" >&2; exit 1; }

# Installs the requirements into $1 unless its stamp says they are there already.
install_into() {
  local venv=$1 stamp="$1/.rlcore-requirements"
  if [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
    return 0
  fi
  if [ ! -x "$venv/bin/python" ]; then
    echo "[setup_python] creating $venv with $("$python" --version 2>&1)"
    "$python" -m venv "$venv"
  fi
  echo "[setup_python] installing $requirements into $venv (the torch wheel is about 900 MB the first time)"
  # --no-deps: the pins are the whole environment (see the requirements file).
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  cp "$requirements" "$stamp"
}

if [ -n "${RLCORE_VENV:-}" ]; then
  install_into "$RLCORE_VENV"
  echo "[setup_python] $RLCORE_VENV: $("$RLCORE_VENV/bin/python" -c 'import torch; print("torch", torch.__version__)')"
  exit 0
fi

cache=${RLCORE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rlcore}
torch_pin=$(grep -E '^torch==' "$requirements") ||
  { echo "[setup_python] error: $requirements pins no torch (torch==VERSION)" >&2; exit 1; }
key=$( { echo "$torch_pin"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
shared="$cache/venv-$key"
mkdir -p "$cache"
# One installer at a time per environment; a half-made one (no stamp) is started over.
exec 9>"$shared.lock"
flock 9
if [ ! -f "$shared/.rlcore-requirements" ] && [ -e "$shared" ]; then
  echo "[setup_python] $shared was left unfinished; making it again"
  rm -rf "$shared"
fi
install_into "$shared"
flock -u 9

if [ "$(readlink .venv 2>/dev/null || true)" != "$shared" ]; then
  rm -rf .venv
  ln -s "$shared" .venv
fi
echo "[setup_python] .venv -> $shared: $(.venv/bin/python -c 'import torch; print("torch", torch.__version__)')"
