# Sourced by the soak scripts. copy_build BUILD_DIR OUT: rlcore, its libraries
# and plugins copied into OUT/build (deleted first), so that rebuilding
# BUILD_DIR during a soak cannot touch the files the running processes have
# mapped; OUT/build/lib goes first on LD_LIBRARY_PATH.
copy_build() {
  local build_dir=$1 out=$2
  rm -rf "$out"
  mkdir -p "$out/build/bin" "$out/build/lib" "$out/build/plugins"
  cp -a "$build_dir/bin/rlcore" "$out/build/bin/"
  cp -a "$build_dir"/lib/*.so* "$out/build/lib/"
  cp -a "$build_dir"/plugins/*.so "$out/build/plugins/"
  export LD_LIBRARY_PATH="$out/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
