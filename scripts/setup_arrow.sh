#!/usr/bin/env bash
# Puts Apache Arrow C++ (libarrow + libparquet, the parquet reader and writer of
# docs/decisions/0009-parquet-with-arrow.md) into .deps/arrow-$version: headers in
# include/, the two shared libraries in lib/. Debian 12 does not package Arrow,
# so they come from PyPI's pyarrow wheel (a zip carrying Arrow's C++ build; rlcore
# uses no Python from it). The wheel is pinned by version and sha256 and lands
# in pip's cache outside the clone, so a fresh clone on the same machine (CI)
# unpacks it without downloading again. Idempotent.
#
# $RLCORE_ARROW_DIR: use an Arrow >= 26 that is already unpacked there instead
# (include/arrow, include/parquet, lib/libarrow.so.*, lib/libparquet.so.*).
set -euo pipefail
cd "$(dirname "$0")/.."
version=26.0.1
soversion=2600
wheel=pyarrow-$version-cp311-cp311-manylinux_2_28_x86_64.whl
sha256=39cb0f2418282c24bea6ceda77b03e5a8f0a5766b63a8bf194d4e2a2c423548c
dest=.deps/arrow-$version

[ -n "${RLCORE_ARROW_DIR:-}" ] && { echo "[setup_arrow] using RLCORE_ARROW_DIR=$RLCORE_ARROW_DIR"; exit 0; }
if [ -f "$dest/.complete" ]; then
  echo "[setup_arrow] $dest is up to date"
  exit 0
fi
python=${PYTHON:-python3}
"$python" -m pip --version >/dev/null 2>&1 ||
  { echo "[setup_arrow] error: '$python -m pip' is missing (apt-get install python3-pip), needed to fetch Arrow" >&2; exit 1; }
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
echo "[setup_arrow] fetching Arrow C++ $version (the pyarrow wheel, 55 MB the first time)"
printf 'pyarrow==%s --hash=sha256:%s\n' "$version" "$sha256" > "$download/requirements.txt"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
  --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
  -r "$download/requirements.txt" -d "$download"
[ -f "$download/$wheel" ] || { echo "[setup_arrow] error: pip did not fetch $wheel" >&2; exit 1; }
"$python" - "$download/$wheel" "$dest.partial" "$soversion" <<'PY'
import os, shutil, sys, zipfile
wheel, dest, soversion = sys.argv[1:]
shutil.rmtree(dest, ignore_errors=True)
wanted_libs = {f"pyarrow/libarrow.so.{soversion}", f"pyarrow/libparquet.so.{soversion}"}
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if name in wanted_libs:
            target = os.path.join(dest, "lib", os.path.basename(name))
        elif name.startswith(("pyarrow/include/arrow/", "pyarrow/include/parquet/")) and not name.endswith("/"):
            target = os.path.join(dest, name[len("pyarrow/"):])
        else:
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with archive.open(name) as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out)
missing = [lib for lib in wanted_libs if not os.path.exists(os.path.join(dest, "lib", os.path.basename(lib)))]
if missing:
    sys.exit(f"[setup_arrow] error: the wheel lacks {missing}")
PY
rm -rf "$dest"
mv "$dest.partial" "$dest"
touch "$dest/.complete"
echo "[setup_arrow] Arrow C++ $version in $dest"
