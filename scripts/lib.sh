# scripts/lib.sh: what the benchmark scripts share. A script sources it
# after its `cd` to the repository root.

# duration_and_ports NAME ARGS...: reads --duration into DUR and
# --port-base into BASE (the script sets their defaults first); --help
# prints the script's header comment; anything else is a usage error.
duration_and_ports() {
	local name=$1
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		--duration) DUR=$2; shift ;;
		--port-base) BASE=$2; shift ;;
		-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
		*) echo "$name: unknown option $1 (try --help)" >&2; exit 2 ;;
		esac
		shift
	done
}
