# Sourced by the example scripts (quickstart.sh, tool_arithmetic.sh): parses
# [--seed N] [--out DIR] [-h|--help] into $seed and $out (defaults set by the
# caller), printing the caller's header comment (lines 2-8) as usage.
#   parse_seed_out_args NAME "$@"
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
parse_seed_out_args() {
  local name=$1; shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --seed) seed=${2:?--seed needs a value}; shift 2 ;;
      --out) out=${2:?--out needs a value}; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      *) echo "$name: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
  done
  case "$seed" in ''|*[!0-9]*) echo "$name: --seed must be a non-negative integer, got '$seed'" >&2; exit 2 ;; esac
  case "$out" in ''|/|.) echo "$name: refusing --out '$out' (it is deleted before the run)" >&2; exit 2 ;; esac
}
