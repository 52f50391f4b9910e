#!/usr/bin/env bash
# Creates the project's Python environment in .venv (or $RLCORE_VENV) from
# scripts/python-requirements.txt: the PyPI torch wheel whose CUDA libtorch the
# CUDA flavour builds against (scripts/build.sh --cuda), plus test-time
# references. Idempotent: it reinstalls only when the requirements change.
# pip's cache stays in its default place outside the clone (~/.cache/pip), so a
# fresh clone on the same machine (CI) installs without downloading again.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${RLCORE_VENV:-.venv}
requirements=scripts/python-requirements.txt
stamp="$venv/.rlcore-requirements"

if [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
  echo "[setup_python] $venv is up to date"
  exit 0
fi
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "[setup_python] error: no $python (apt-get install python3 python3-venv)" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ]; then
  echo "[setup_python] creating $venv with $("$python" --version 2>&1)"
  "$python" -m venv "$venv"
fi
echo "[setup_python] installing $requirements into $venv (the torch wheel is about 900 MB the first time)"
# --no-deps: the pins are the whole environment (see the requirements file).
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
cp "$requirements" "$stamp"
echo "[setup_python] done: $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)')"
